// Package dashboard is the coordinator's ops dashboard: plain HTML, CSS and
// JavaScript modules embedded in the binary (no CDN, no build step), served
// at / beside the HTTP API, which it reads like any other client. The API
// package mounts it and guards it (login, session cookie, CSRF).
//
// The page's views — runs, a run's live tree, a thread, approvals, workers —
// are routed in the URL fragment (/#/runs/ID), so the server has one page
// to serve. Its automation contract (the data-* attributes tests and
// scripts may rely on) is documented in docs/dashboard.md.
package dashboard

import (
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets
var assets embed.FS

// contentSecurity allows the page nothing but its own origin: no inline
// script, no other site's code, no framing.
const contentSecurity = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

// Handler serves the page at / and its files under /assets/.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix("/assets/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secure(w)
		if r.URL.Path == "/" || r.URL.Path == "/index.html" {
			w.Header().Set("Cache-Control", "no-cache")
			http.ServeFileFS(w, r, sub, "index.html")
			return
		}
		if !strings.HasPrefix(r.URL.Path, "/assets/") || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		// Assets change with the binary: revalidate rather than cache blindly.
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// secure sets the headers every page and asset carries.
func secure(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurity)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
}

var loginPage = template.Must(template.ParseFS(assets, "assets/login.html"))

// ServeLogin writes the login form with status and, if not empty, a message
// saying why the last try failed.
func ServeLogin(w http.ResponseWriter, status int, message string) {
	secure(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	loginPage.Execute(w, struct{ Message string }{message})
}
