package coordinatorcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The --webhook* flags: a secret is required with a URL or an allow-list,
// a malformed one is refused without being shown, and a file may hold it.
func TestWebhookFlags(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		err  string // "" means accepted
	}{
		{"none", nil, ""},
		{"url and secret", []string{"--webhook", "https://a.example/h", "--webhook-secret", secret}, ""},
		{"secret file", []string{"--webhook-allow", "https://a.example/", "--webhook-secret-file", file}, ""},
		{"url without secret", []string{"--webhook", "https://a.example/h"}, "need a secret"},
		{"allow without secret", []string{"--webhook-allow", "https://a.example/"}, "need a secret"},
		{"malformed secret", []string{"--webhook", "https://a.example/h", "--webhook-secret", "whsec_c2hvcnQ="}, "bad secret"},
		{"no prefix", []string{"--webhook", "https://a.example/h", "--webhook-secret", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "bad secret"},
		{"both secrets", []string{"--webhook-secret", secret, "--webhook-secret-file", file}, "not both"},
		{"unknown event", []string{"--webhook-events", "run.started", "--webhook-secret", secret}, "unknown event type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, o := newFlags()
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			c, err := o.webhooks.config()
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("got %v, want an error saying %q", err, tc.err)
			case err != nil && strings.Contains(err.Error(), "MfKQ9r8"):
				t.Fatalf("the error shows the secret: %v", err)
			case err == nil && len(tc.args) > 0 && c.Secret.IsZero() && tc.name != "none":
				t.Fatal("no secret parsed")
			}
		})
	}
}
