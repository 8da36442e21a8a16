package api

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
)

// browser is a client that keeps cookies and does not follow redirects.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
	// cookies by name, as the browser would send them
	cookies map[string]string
}

func newBrowser(t *testing.T, base string) *browser {
	return &browser{t: t, base: base, cookies: map[string]string{}, c: &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

func (b *browser) send(method, path, body string, header ...string) (*http.Response, string) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.base+path, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	for k, v := range b.cookies {
		req.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	for _, c := range res.Cookies() {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c.Value
		}
	}
	return res, string(data)
}

func (b *browser) login(token string) *http.Response {
	b.t.Helper()
	res, _ := b.send("POST", "/login", url.Values{"token": {token}}.Encode(), "Content-Type", "application/x-www-form-urlencoded")
	return res
}

func TestLoginSessionCookie(t *testing.T) {
	h := newHarness(t, Config{Token: testToken})
	h.fake.addRun("r1", event.Succeeded)
	b := newBrowser(t, h.url)

	// Before logging in: the page sends people to /login, nothing else works.
	res, _ := b.send("GET", "/", "")
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Fatalf("GET / without a session: %d %s, want 303 to /login", res.StatusCode, res.Header.Get("Location"))
	}
	for _, p := range []string{"/assets/app.css", "/assets/js/app.js", "/v1/runs", "/v1/runs/r1"} {
		if res, _ := b.send("GET", p, ""); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without a session: %d, want 401", p, res.StatusCode)
		}
	}
	res, page := b.send("GET", "/login", "")
	if res.StatusCode != 200 || !strings.Contains(page, `name="token"`) || !strings.Contains(page, `method="post"`) {
		t.Fatalf("GET /login: %d\n%s", res.StatusCode, page)
	}

	// A wrong token, and a token in the URL, are refused.
	if res := b.login("wrong"); res.StatusCode != http.StatusUnauthorized || len(b.cookies) != 0 {
		t.Errorf("wrong token: %d, cookies %v", res.StatusCode, b.cookies)
	}
	res, _ = b.send("POST", "/login?token="+testToken, "", "Content-Type", "application/x-www-form-urlencoded")
	if res.StatusCode != http.StatusBadRequest || len(b.cookies) != 0 {
		t.Errorf("token in the URL: %d, cookies %v", res.StatusCode, b.cookies)
	}

	// The right one sets an HttpOnly, SameSite=Strict session cookie.
	res = b.login(testToken)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
		t.Fatalf("login: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	var session, csrf *http.Cookie
	for _, c := range res.Cookies() {
		switch c.Name {
		case SessionCookie:
			session = c
		case CSRFCookie:
			csrf = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Secure || session.Path != "/" {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, not Secure over plain HTTP", session)
	}
	if csrf == nil || csrf.HttpOnly || csrf.SameSite != http.SameSiteStrictMode {
		t.Fatalf("CSRF cookie %+v: want readable by the page, SameSite=Strict", csrf)
	}
	if strings.Contains(session.Value, testToken) || strings.Contains(csrf.Value, testToken) {
		t.Fatal("a cookie carries the token")
	}

	// Logged in: pages, assets and the API answer.
	for _, p := range []string{"/", "/assets/app.css", "/assets/js/app.js", "/v1/runs/r1"} {
		if res, body := b.send("GET", p, ""); res.StatusCode != 200 {
			t.Errorf("GET %s with a session: %d %s", p, res.StatusCode, body)
		}
	}
	// A state-changing request needs the CSRF value besides the cookie.
	submit := `{"task": "x"}`
	if res, body := b.send("POST", "/v1/runs", submit); res.StatusCode != http.StatusForbidden {
		t.Errorf("POST without the CSRF header: %d %s, want 403", res.StatusCode, body)
	}
	if res, _ := b.send("POST", "/v1/runs", submit, CSRFHeader, "forged"); res.StatusCode != http.StatusForbidden {
		t.Errorf("POST with a wrong CSRF value: %d, want 403", res.StatusCode)
	}
	if res, body := b.send("POST", "/v1/runs", submit, CSRFHeader, b.cookies[CSRFCookie]); res.StatusCode != http.StatusAccepted {
		t.Errorf("POST with the CSRF value: %d %s, want 202", res.StatusCode, body)
	}
	// A cross-site request is refused even with the cookie and value.
	if res, _ := b.send("POST", "/v1/runs", submit, CSRFHeader, b.cookies[CSRFCookie], "Sec-Fetch-Site", "cross-site"); res.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site POST: %d, want 403", res.StatusCode)
	}
	// A forged or tampered session is nobody's.
	stolen := b.cookies[SessionCookie]
	for _, v := range []string{stolen[:len(stolen)-2] + "xx", "v1.99999999999.abc.def", strings.Replace(stolen, "v1.", "v1.9", 1)} {
		other := newBrowser(t, h.url)
		other.cookies[SessionCookie] = v
		if res, _ := other.send("GET", "/v1/runs", ""); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("tampered session %q: %d, want 401", v, res.StatusCode)
		}
	}

	// Logging out needs the CSRF value, then clears the cookies and
	// revokes the session.
	if res, _ := b.send("POST", "/logout", ""); res.StatusCode != http.StatusForbidden {
		t.Errorf("logout without the CSRF value: %d, want 403", res.StatusCode)
	}
	if res, _ := b.send("POST", "/logout", "", CSRFHeader, b.cookies[CSRFCookie]); res.StatusCode != http.StatusNoContent {
		t.Errorf("logout: %d", res.StatusCode)
	}
	if len(b.cookies) != 0 {
		t.Errorf("cookies left after logout: %v", b.cookies)
	}
	replay := newBrowser(t, h.url)
	replay.cookies[SessionCookie] = stolen
	if res, _ := replay.send("GET", "/v1/runs", ""); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("a session after its logout: %d, want 401", res.StatusCode)
	}
	// The bearer header still works as before, without any CSRF value.
	if r := h.do("POST", "/v1/runs", submit); r.status != http.StatusAccepted {
		t.Errorf("bearer POST: %d %s", r.status, r.body)
	}
}

func TestSessionExpires(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	ss := newSessions("secret", func() time.Time { return now })
	v, csrf := ss.issue()
	nonce, _, ok := ss.check(v)
	if !ok || !ss.csrfOK(nonce, csrf) || ss.csrfOK(nonce, "") || ss.csrfOK(nonce, csrf+"x") {
		t.Fatalf("a fresh session: ok %v", ok)
	}
	now = now.Add(SessionTTL)
	if _, _, ok := ss.check(v); ok {
		t.Error("a session past its TTL still counts")
	}
	if _, _, ok := newSessions("other", time.Now).check(v); ok {
		t.Error("a session of another token counts")
	}
}

func TestDashboardWithoutToken(t *testing.T) {
	h := newHarness(t, Config{})
	b := newBrowser(t, h.url)
	res, page := b.send("GET", "/", "")
	if res.StatusCode != 200 || !strings.Contains(page, `/assets/js/app.js`) {
		t.Fatalf("GET /: %d\n%s", res.StatusCode, page)
	}
	csp := res.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if res, _ := b.send("GET", "/login", ""); res.StatusCode != http.StatusSeeOther {
		t.Errorf("GET /login without a token configured: %d, want a redirect to /", res.StatusCode)
	}
	// The loopback rule holds for the page too (DNS rebinding).
	req, _ := http.NewRequest("GET", h.url+"/", nil)
	req.Host = "evil.example:80"
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusForbidden {
		t.Errorf("GET / for host evil.example: %d, want 403", r2.StatusCode)
	}
	for _, p := range []string{"/assets/", "/assets/nothing.js", "/assets/../go.mod", "/assets/js/"} {
		if res, _ := b.send("GET", p, ""); res.StatusCode == http.StatusOK {
			t.Errorf("GET %s: 200, want nothing served", p)
		}
	}
}
