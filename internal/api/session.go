package api

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/dashboard"
)

// Browser sessions. With a token configured, a person gives it once to
// POST /login and gets a session cookie; the API then accepts that cookie
// in place of the bearer header. The cookie is HttpOnly (no script reads
// it), SameSite=Strict (no other site's page makes the browser send it) and
// Secure when served over TLS. The token itself never appears in a URL,
// a cookie or a page.
//
// A session is stateless, so every coordinator sharing the token accepts
// it and a restart keeps people logged in:
//
//	v1.<expiry unix seconds>.<nonce>.<HMAC-SHA256(key, "v1.<expiry>.<nonce>")>
//
// where key is derived from the token: changing the token ends every
// session. Logging out clears the cookie and revokes its nonce on this
// coordinator until it would have expired.
//
// CSRF: besides SameSite=Strict and the cross-origin check every request
// passes, a state-changing request that authenticates with the cookie must
// carry the session's CSRF value in the X-Formica-CSRF header. The value is
// HMAC(key, "csrf.<nonce>"), handed to the page in the formica_csrf cookie
// (readable by the page's own script, useless to any other site). Requests
// with the bearer header need none: a browser never adds that header on its
// own.
const (
	// SessionCookie holds the session.
	SessionCookie = "formica_session"
	// CSRFCookie holds the session's CSRF value for the page's script.
	CSRFCookie = "formica_csrf"
	// CSRFHeader carries the CSRF value on state-changing requests.
	CSRFHeader = "X-Formica-CSRF"
	// SessionTTL is how long a login lasts.
	SessionTTL = 12 * time.Hour
)

// sessions issues and checks session cookies.
type sessions struct {
	key []byte
	now func() time.Time

	mu      sync.Mutex
	revoked map[string]time.Time // nonce → expiry
}

func newSessions(token string, now func() time.Time) *sessions {
	k := sha256.Sum256([]byte("formica-session-v1\x00" + token))
	return &sessions{key: k[:], now: now, revoked: map[string]time.Time{}}
}

func (ss *sessions) mac(msg string) string {
	m := hmac.New(sha256.New, ss.key)
	m.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// issue returns a new session's cookie value and its CSRF value.
func (ss *sessions) issue() (session, csrf string) {
	var b [18]byte
	rand.Read(b[:])
	nonce := base64.RawURLEncoding.EncodeToString(b[:])
	body := "v1." + strconv.FormatInt(ss.now().Add(SessionTTL).Unix(), 10) + "." + nonce
	return body + "." + ss.mac(body), ss.mac("csrf." + nonce)
}

// check returns the nonce and expiry of a valid, unexpired, unrevoked
// session cookie value.
func (ss *sessions) check(v string) (nonce string, expiry time.Time, ok bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 4 || parts[0] != "v1" {
		return "", time.Time{}, false
	}
	body := strings.Join(parts[:3], ".")
	if subtle.ConstantTimeCompare([]byte(ss.mac(body)), []byte(parts[3])) != 1 {
		return "", time.Time{}, false
	}
	sec, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return "", time.Time{}, false
	}
	expiry = time.Unix(sec, 0)
	if !ss.now().Before(expiry) {
		return "", time.Time{}, false
	}
	ss.mu.Lock()
	_, gone := ss.revoked[parts[2]]
	ss.mu.Unlock()
	return parts[2], expiry, !gone
}

// csrfOK reports whether got is the CSRF value of the session nonce.
func (ss *sessions) csrfOK(nonce, got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(ss.mac("csrf."+nonce)), []byte(got)) == 1
}

// revoke ends a session on this coordinator and forgets expired ones.
func (ss *sessions) revoke(nonce string, expiry time.Time) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := ss.now()
	maps.DeleteFunc(ss.revoked, func(_ string, exp time.Time) bool { return !now.Before(exp) })
	ss.revoked[nonce] = expiry
}

// session returns the nonce of the request's valid session cookie.
func (s *Server) session(r *http.Request) (nonce string, expiry time.Time, ok bool) {
	c, err := r.Cookie(SessionCookie)
	if s.sess == nil || err != nil {
		return "", time.Time{}, false
	}
	return s.sess.check(c.Value)
}

// safeMethod: requests that change nothing need no CSRF value.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

func setCookie(w http.ResponseWriter, r *http.Request, name, value string, httpOnly bool, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: httpOnly, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

// login serves /login: GET shows the form, POST takes the token (form field
// "token", in the body only) and sets the session cookies. Without a
// configured token there is nothing to log in to: it sends people to the
// dashboard.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	if s.sess == nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if r.Method == http.MethodGet {
		if _, _, ok := s.session(r); ok {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		dashboard.ServeLogin(w, http.StatusOK, "")
		return
	}
	if r.URL.RawQuery != "" {
		// The token belongs in the body, never in a URL that logs keep.
		dashboard.ServeLogin(w, http.StatusBadRequest, "Send the token in the form, not in the address.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		dashboard.ServeLogin(w, http.StatusBadRequest, "The form could not be read.")
		return
	}
	got := strings.TrimSpace(r.PostForm.Get("token"))
	if got == "" || !s.tokenIs(got) {
		s.log.Warn("api: failed login", "remote", r.RemoteAddr)
		dashboard.ServeLogin(w, http.StatusUnauthorized, "That token is not the coordinator's.")
		return
	}
	session, csrf := s.sess.issue()
	age := int(SessionTTL / time.Second)
	setCookie(w, r, SessionCookie, session, true, age)
	setCookie(w, r, CSRFCookie, csrf, false, age)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// logout serves POST /logout: it revokes the session and clears both
// cookies. It needs the CSRF value like any state-changing request, so no
// other site can log a person out.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	if nonce, exp, ok := s.session(r); ok {
		if !s.sess.csrfOK(nonce, csrfValue(r)) {
			writeErrorBody(w, http.StatusForbidden, codeForbidden, "the CSRF value ("+CSRFHeader+") is missing or wrong")
			return
		}
		s.sess.revoke(nonce, exp)
	}
	setCookie(w, r, SessionCookie, "", true, -1)
	setCookie(w, r, CSRFCookie, "", false, -1)
	if strings.Contains(r.Header.Get("Accept"), "text/html") {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// csrfValue is the CSRF value a request carries in its header.
func csrfValue(r *http.Request) string { return r.Header.Get(CSRFHeader) }

// servePage serves the dashboard's pages and assets. With a token, a
// browser without a session is sent to /login (pages) or refused (assets
// and everything else).
func (s *Server) servePage(ui http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The login page's style sheet is the one file anyone may read.
		_, _, inSession := s.session(r)
		if s.sess != nil && r.URL.Path != "/assets/login.css" && !inSession && !s.tokenOK(r) {
			if r.URL.Path == "/" {
				noStore(w)
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			writeErrorBody(w, http.StatusUnauthorized, codeUnauthorized, "log in first (/login)")
			return
		}
		ui.ServeHTTP(w, r)
	})
}

func noStore(w http.ResponseWriter) { w.Header().Set("Cache-Control", "no-store") }
