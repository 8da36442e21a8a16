package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/broker/brokertest"
)

// A cluster command whose credentials the server refuses says so at once
// instead of retrying the refusal until --connect-timeout.
func TestClusterCommandRefusedAtOnce(t *testing.T) {
	s := brokertest.Start(t, brokertest.WithToken("s3cret"), brokertest.WithoutJetStream())
	var out, errOut bytes.Buffer
	code := Main([]string{"runs", "--nats", s.ClientURL(), "--nats-token", "wrong", "--connect-timeout", "60s"}, Stdio{Out: &out, Err: &errOut})
	if code != ExitFailed {
		t.Fatalf("exit %d, want %d\n%s", code, ExitFailed, errOut.String())
	}
	msg := strings.ToLower(errOut.String())
	if !strings.Contains(msg, "authorization violation") || strings.Contains(msg, "no connection within") {
		t.Fatalf("stderr %q: want the authorization violation, not a timeout", errOut.String())
	}
}

// startTrusted starts a NATS server that trusts only credentials of a, as
// a coordinator's does.
func startTrusted(t *testing.T, a *auth.Authority) string {
	t.Helper()
	s := brokertest.Start(t, brokertest.WithoutJetStream(), brokertest.WithConfig(func(c *broker.ServerConfig) { c.Trust = a }))
	return s.ClientURL()
}

// writeCreds writes a credential of role issued by a to a file.
func writeCreds(t *testing.T, a *auth.Authority, role auth.Role, id string) string {
	t.Helper()
	c, err := a.Issue(role, id)
	if err != nil {
		t.Fatal(err)
	}
	data, err := c.File()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), id+".creds")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A credential mistake is told at once (before --connect-timeout 2s
// could pass), naming the credentials used and the command that issues
// the right ones.
func TestCredentialErrorsPointAtTheFix(t *testing.T) {
	a, err := auth.NewEphemeral()
	if err != nil {
		t.Fatal(err)
	}
	other, err := auth.NewEphemeral()
	if err != nil {
		t.Fatal(err)
	}
	url := startTrusted(t, a)
	worker := writeCreds(t, a, auth.Worker, "w1")
	foreign := writeCreds(t, other, auth.Client, "elsewhere")
	const fix = "give a client credential with --nats-creds FILE or $FORMICA_NATS_CREDS, issued with: coordinator creds --data-dir <coordinator data dir> --role client --out client.creds"
	for _, tc := range []struct {
		name  string
		creds string
		want  string
	}{
		{"none", "", "formica: runs: " + url + " refused a connection with no credentials (nats: Authorization Violation); " + fix + "\n"},
		{"foreign", foreign, "formica: runs: " + url + " refused a connection with the credentials in " + foreign + " (nats: Authorization Violation); " + fix + "\n"},
		{"worker's", worker, "formica: runs: " + worker + " holds a worker credential (worker w1), but formica needs a client credential; issue one with: coordinator creds --data-dir <coordinator data dir> --role client --out client.creds\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("FORMICA_NATS_CREDS", tc.creds)
			var out, errOut bytes.Buffer
			code := Main([]string{"runs", "--nats", url, "--connect-timeout", "2s"}, Stdio{Out: &out, Err: &errOut})
			if code != ExitFailed || errOut.String() != tc.want {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d, stderr:\n%s", code, errOut.String(), ExitFailed, tc.want)
			}
		})
	}
	// run --nats says the same.
	t.Setenv("FORMICA_NATS_CREDS", "")
	var out, errOut bytes.Buffer
	Main([]string{"run", "--nats", url, "--model", "sim", "a task"}, Stdio{Out: &out, Err: &errOut})
	if want := "formica: run: " + url + " refused a connection with no credentials (nats: Authorization Violation); " + fix + "\n"; errOut.String() != want {
		t.Fatalf("run --nats: stderr:\n%s\nwant:\n%s", errOut.String(), want)
	}
}
