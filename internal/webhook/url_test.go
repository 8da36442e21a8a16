package webhook

import (
	"errors"
	"testing"
)

func TestAllowList(t *testing.T) {
	allow := AllowList{"https://hooks.example.com/", "http://10.0.0.5:8080/formica/"}
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://hooks.example.com/a/b?x=1", true},
		{"http://10.0.0.5:8080/formica/run", true},
		{"https://hooks.example.com.evil.net/", false},
		{"http://hooks.example.com/", false}, // scheme is part of the prefix
		{"http://169.254.169.254/latest/meta-data/", false},
		{"http://10.0.0.5:8080/admin", false},
		{"ftp://hooks.example.com/", false},
		{"https:///nohost", false},
		{"not a url", false},
	} {
		err := allow.Check(tc.url)
		if tc.ok != (err == nil) {
			t.Errorf("Check(%q) = %v, want ok %v", tc.url, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrURL) {
			t.Errorf("Check(%q): %v is not ErrURL", tc.url, err)
		}
	}
	if err := AllowList(nil).Check("https://hooks.example.com/"); err == nil {
		t.Error("an empty allow list allowed a URL")
	}
}

func TestShownDropsCredentials(t *testing.T) {
	if got, want := Shown("https://user:pw@hooks.example.com/p/q?token=s3cret#f"), "https://hooks.example.com/p/q"; got != want {
		t.Errorf("Shown = %q, want %q", got, want)
	}
}
