package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// requireToken lets a request through only with "Authorization: Bearer
// <token>" (scheme case-insensitive) or a valid session cookie (see
// session.go), which on a state-changing request must come with its CSRF
// value. Without a configured token it lets everything through. Both sides
// are hashed first, so the constant-time compare does not leak the token's
// length either.
func (s *Server) requireToken(h http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			if nonce, _, ok := s.session(r); ok {
				if !safeMethod(r.Method) && !s.sess.csrfOK(nonce, csrfValue(r)) {
					writeErrorBody(w, http.StatusForbidden, codeForbidden, "the CSRF value ("+CSRFHeader+") is missing or wrong")
					return
				}
				h.ServeHTTP(w, r)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="formica"`)
			writeErrorBody(w, http.StatusUnauthorized, codeUnauthorized, "a bearer token is required (Authorization: Bearer <token>), or log in at /login")
			return
		}
		if !s.tokenIs(got) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="formica", error="invalid_token"`)
			writeErrorBody(w, http.StatusUnauthorized, codeUnauthorized, "invalid bearer token")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// tokenIs reports whether got is the configured token, in constant time.
func (s *Server) tokenIs(got string) bool {
	want, sum := sha256.Sum256([]byte(s.cfg.Token)), sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(want[:], sum[:]) == 1
}

// tokenOK reports whether the request carries the right bearer token.
func (s *Server) tokenOK(r *http.Request) bool {
	got, ok := bearer(r.Header.Get("Authorization"))
	return ok && s.tokenIs(got)
}

// bearer returns the token of an Authorization header value.
func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// checkHost, when there is no token, answers only requests addressed to a
// loopback host name. A loopback-only API is otherwise open to any web page
// that rebinds its own domain name to 127.0.0.1 (DNS rebinding): the browser
// would deem such requests same-origin. With a token there is nothing to
// check: a page cannot make the browser send it.
func (s *Server) checkHost(h http.Handler) http.Handler {
	if s.cfg.Token != "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if hh, _, err := net.SplitHostPort(host); err == nil {
			host = hh
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		if host != "" && !isLoopback(host) {
			writeErrorBody(w, http.StatusForbidden, codeForbidden,
				fmt.Sprintf("host %q refused: without a token the API answers only to localhost, 127.0.0.0/8 and ::1", host))
			return
		}
		h.ServeHTTP(w, r)
	})
}
