package browser_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const testToken = "browser-test-token-0123456789abcdef"

// TestTokenLogin: with a token nothing works before logging in; the login
// form works and the page can then submit runs; a cross-site POST is
// refused; logging out ends it.
func TestTokenLogin(t *testing.T) {
	p := newPage(t)
	c := startCoord(t, coordOpts{token: testToken})
	c.startWorker("w1", 4)

	// Before logging in: the page sends the browser to /login, and no
	// asset or API call answers.
	p.open(c.api + "/")
	p.wait("the login form shows", `location.pathname === '/login' && document.querySelector('input[name="token"]') !== null`)
	for _, path := range []string{"/", "/assets/js/app.js", "/v1/runs", "/v1/approvals", "/v1/workers"} {
		status := eval[int](p, fmt.Sprintf(`fetch(%q, {redirect: 'manual'}).then(r => r.type === 'opaqueredirect' ? 303 : r.status)`, path))
		if status != http.StatusUnauthorized && !(path == "/" && status == http.StatusSeeOther) {
			t.Errorf("GET %s before login: %d", path, status)
		}
	}
	post := eval[int](p, `fetch('/v1/runs', {method: 'POST', body: '{"task": "x", "id": "before-login"}'}).then(r => r.status)`)
	if post != http.StatusUnauthorized {
		t.Errorf("POST /v1/runs before login: %d, want 401", post)
	}

	// A wrong token stays on the form; the right one logs in.
	p.typeInto(`input[name="token"]`, "not-the-token")
	p.click(`button[type="submit"]`)
	p.wait("the form says the token is wrong", `document.querySelector('.error') !== null && location.pathname === '/login'`)
	p.typeInto(`input[name="token"]`, testToken)
	p.click(`button[type="submit"]`)
	p.wait("the dashboard shows", `location.pathname === '/' && document.querySelector('#submit-form') !== null`)
	if cookies := eval[string](p, `document.cookie`); strings.Contains(cookies, "formica_session") || strings.Contains(cookies, testToken) {
		t.Errorf("the page's script sees %q: the session cookie must be HttpOnly and the token nowhere", cookies)
	}
	if href := eval[string](p, `location.href`); strings.Contains(href, testToken) {
		t.Errorf("the token is in the URL %s", href)
	}

	// Logged in, the page submits (with its CSRF value) and follows runs.
	p.typeInto("#submit-task", "Plan:\n- a\n- b")
	p.typeInto("#submit-id", "after-login")
	p.click("#submit-button")
	p.wait("the run's tree is final", `location.hash === '#/runs/after-login' && document.querySelector('#tree') && document.querySelector('#tree').dataset.final === 'true'`)
	if rec := c.waitFinal("after-login"); len(rec.Threads) != 3 {
		t.Errorf("run submitted after login: %d threads", len(rec.Threads))
	}

	// A page of another site posts to the API: refused, nothing queued.
	evil := crossSite(t, c.api)
	p.open(evil + "/")
	p.wait("the cross-site form was answered", fmt.Sprintf(`location.href.startsWith(%q) && document.body.innerText.includes('"error"')`, c.api))
	answer := eval[string](p, `document.body.innerText`)
	for _, id := range []string{"evil-form", "evil-fetch", "before-login"} {
		if status, _ := c.do("GET", "/v1/runs/"+id, nil); status != http.StatusNotFound {
			t.Errorf("run %s exists (GET: %d): a cross-site or unauthenticated POST got through; the form's answer: %s", id, status, answer)
		}
	}
	if !strings.Contains(answer, "forbidden") && !strings.Contains(answer, "unauthorized") {
		t.Errorf("cross-site form answered %s", answer)
	}

	// Logging out ends the session.
	p.open(c.api + "/")
	p.wait("the dashboard shows", `document.querySelector('#logout') && !document.querySelector('#logout').hidden`)
	p.click("#logout")
	p.wait("back at the login form", `location.pathname === '/login'`)
	if status := eval[int](p, `fetch('/v1/runs').then(r => r.status)`); status != http.StatusUnauthorized {
		t.Errorf("GET /v1/runs after logout: %d, want 401", status)
	}
}

// crossSite serves, on another site (localhost instead of 127.0.0.1), a
// page that tries to queue runs on the coordinator at api: a fetch with
// the browser's credentials, then a plain form.
func crossSite(t *testing.T, api string) string {
	t.Helper()
	page := fmt.Sprintf(`<!doctype html><html><body>
<form id="f" method="post" action="%[1]s/v1/runs" enctype="text/plain">
<input type="hidden" name='{"id": "evil-form", "task": "x", "pad": "' value='"}'>
</form>
<script>
fetch(%[2]q, {method: 'POST', mode: 'no-cors', credentials: 'include', body: '{"id": "evil-fetch", "task": "x"}'})
  .catch(() => {}).finally(() => document.getElementById('f').submit());
</script></body></html>`, api, api+"/v1/runs")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	return "http://localhost:" + port
}
