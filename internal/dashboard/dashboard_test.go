package dashboard

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestAssetsResolve holds every module import and every page reference to
// a file that is embedded, so a renamed file cannot ship a broken page.
func TestAssetsResolve(t *testing.T) {
	imports := regexp.MustCompile(`(?m)^\s*(?:import|export)\b[^'"]*?from\s+'(\./[^']+)'`)
	refs := regexp.MustCompile(`(?:href|src)="/assets/([^"]+)"`)
	n := 0
	fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, _ := assets.ReadFile(path)
		dir := path[:strings.LastIndex(path, "/")]
		for _, m := range imports.FindAllStringSubmatch(string(data), -1) {
			n++
			if _, err := fs.Stat(assets, dir+"/"+strings.TrimPrefix(m[1], "./")); err != nil {
				t.Errorf("%s imports %s: not embedded", path, m[1])
			}
		}
		for _, m := range refs.FindAllStringSubmatch(string(data), -1) {
			n++
			if _, err := fs.Stat(assets, "assets/"+m[1]); err != nil {
				t.Errorf("%s refers to /assets/%s: not embedded", path, m[1])
			}
		}
		return nil
	})
	if n < 10 {
		t.Errorf("only %d references found: the patterns no longer match the sources", n)
	}
}

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	for path, want := range map[string]string{
		"/":                  "text/html",
		"/assets/app.css":    "text/css",
		"/assets/js/app.js":  "text/javascript",
		"/assets/login.html": "text/html",
	} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), want) {
			t.Errorf("GET %s: %d %q, want 200 %s", path, res.StatusCode, res.Header.Get("Content-Type"), want)
		}
		if res.Header.Get("Content-Security-Policy") == "" || res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: security headers missing", path)
		}
	}
	res, err := http.Get(srv.URL + "/elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 404 {
		t.Errorf("GET /elsewhere: %d, want 404", res.StatusCode)
	}
}

func TestLoginPageEscapes(t *testing.T) {
	w := httptest.NewRecorder()
	ServeLogin(w, 401, `<script>alert(1)</script>`)
	if w.Code != 401 || strings.Contains(w.Body.String(), "<script>alert") {
		t.Errorf("status %d, body:\n%s", w.Code, w.Body.String())
	}
}
