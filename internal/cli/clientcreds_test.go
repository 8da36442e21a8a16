package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/coordinator"
	"github.com/formica-run/formica/internal/embedded"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/store"
)

// TestClusterCommandsOnClientCredentials: submit, approvals, watch,
// approve and get work over NATS (TCP) with a client's credentials, which
// create no JetStream consumer: a queued run held on an approval is
// listed, watched to its end once approved, and read back.
func TestClusterCommandsOnClientCredentials(t *testing.T) {
	a, err := auth.NewEphemeral()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := embedded.Start(ctx, embedded.Config{Authority: a, Durable: true, Workers: 1, Slots: 4,
		Server:        broker.ServerConfig{DataDir: t.TempDir(), JetStream: true, Listen: "127.0.0.1:0"},
		Models:        runner.ModelOpenerFunc(providers.Open),
		AllowScripted: true, Coordinator: coordinator.Config{Cwd: t.TempDir(), AllowScripted: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	creds := writeCreds(t, a, auth.Client, "ops")
	url := s.Server.ClientURL()
	formica := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := Main(append(args, "--nats", url, "--nats-creds", creds), Stdio{Out: &out, Err: &errOut})
		return code, out.String(), errOut.String()
	}

	// Followed with the same credentials, to know when the approval is held.
	nc, err := nats.Connect(url, nats.UserCredentials(creds), nats.CustomInboxPrefix(auth.InboxPrefix(auth.Client, "ops")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st, err := store.Open(ctx, nc, store.Config{Client: true})
	if err != nil {
		t.Fatal(err)
	}
	held, err := st.WatchApprovals(ctx)
	if err != nil {
		t.Fatal(err)
	}

	script := filepath.Join(t.TempDir(), "held.yaml")
	if err := os.WriteFile(script, []byte(`responses:
  - tool_calls: [{name: write_file, arguments: '{"path":"out.txt","content":"held"}'}]
  - text: root finished
`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := formica("submit", "--model", "scripted:"+script, "write it")
	run := strings.TrimSpace(out)
	if code != ExitOK || run == "" {
		t.Fatalf("submit: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	var approval store.Approval
	for approval.RunID != run {
		select {
		case approval = <-held:
		case <-ctx.Done():
			t.Fatal("no approval of the run was held")
		}
	}

	code, out, errOut = formica("approvals", "--json")
	var listed []api.Approval
	if code != ExitOK || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 ||
		listed[0].ID != approval.ID || listed[0].RunID != run || listed[0].Tool != "write_file" {
		t.Fatalf("approvals: exit %d, stdout %s, stderr %s", code, out, errOut)
	}

	type result struct {
		code     int
		out, err string
	}
	watched := make(chan result, 1)
	go func() {
		code, out, errOut := formica("watch", run, "--no-tty")
		watched <- result{code, out, errOut}
	}()
	if code, _, errOut := formica("approve", approval.ID, "--allow"); code != ExitOK {
		t.Fatalf("approve: exit %d, stderr %s", code, errOut)
	}
	select {
	case w := <-watched:
		if w.code != ExitOK || w.out != "root finished\n" || !strings.Contains(w.err, "started") {
			t.Errorf("watch: exit %d, stdout %q, stderr:\n%s", w.code, w.out, w.err)
		}
	case <-ctx.Done():
		t.Fatal("watch did not end with the run")
	}

	code, out, errOut = formica("get", "--json", run)
	var rec struct{ Status, Output string }
	if code != ExitOK || json.Unmarshal([]byte(out), &rec) != nil || rec.Status != "succeeded" || rec.Output != "root finished" {
		t.Errorf("get: exit %d, stdout %s, stderr %s", code, out, errOut)
	}
}
