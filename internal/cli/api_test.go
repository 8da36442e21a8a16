package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formica-run/formica/client"
	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/apitest"
)

// heldRun submits a run whose root asks to write a file, and returns its
// id once the approval is held.
func heldRun(t *testing.T, ctx context.Context, c *client.Client, model string) string {
	t.Helper()
	id, err := c.Submit(ctx, client.SubmitRequest{Task: "write it", Model: model})
	if err != nil {
		t.Fatal(err)
	}
	waitHeld(t, ctx, c, id, 0)
	return id
}

var errHeld = errors.New("held")

// waitHeld returns once run id, past the event id after, asks for an
// approval.
func waitHeld(t *testing.T, ctx context.Context, c *client.Client, id string, after uint64) {
	t.Helper()
	err := c.Events(ctx, id, after, func(_ uint64, e client.Event) error {
		if e.Type == "approval.requested" {
			return errHeld
		}
		return nil
	})
	if !errors.Is(err, errHeld) {
		t.Fatalf("run %s asked for no approval: %v", id, err)
	}
}

// TestClusterCommandsOverAPI: the cluster commands work through a
// coordinator's HTTP API as over NATS: a run submitted from a spec file
// and followed to its end, listed, read, watched and its transcript shown;
// an approval listed and allowed while the run is watched; a held run
// cancelled, resumed with --wait and cancelled again; workers and assets; and the API's errors.
func TestClusterCommandsOverAPI(t *testing.T) {
	cl := apitest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(cl.URL, apitest.Token)
	if err != nil {
		t.Fatal(err)
	}
	formica := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := Main(append(args, "--api", cl.URL, "--token", apitest.Token), Stdio{Out: &out, Err: &errOut})
		return code, out.String(), errOut.String()
	}

	agent := filepath.Join(t.TempDir(), "agent.yaml")
	done := apitest.Script(t, "responses:\n  - text: all done\n")
	if err := os.WriteFile(agent, []byte("name: doer\nmodel: "+done+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := formica("submit", "--wait", "--no-tty", "--id", "first", "--agent", agent, "do it")
	if code != ExitOK || out != "all done\n" || !strings.Contains(errOut, "formica: run first") {
		t.Fatalf("submit --wait: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	code, out, errOut = formica("runs", "--json", "--status", "succeeded")
	var runs []struct {
		RunID string `json:"run_id"`
	}
	if code != ExitOK || json.Unmarshal([]byte(out), &runs) != nil || len(runs) != 1 || runs[0].RunID != "first" {
		t.Errorf("runs: exit %d, stdout %s, stderr %s", code, out, errOut)
	}
	if code, out, errOut = formica("get", "first"); code != ExitOK || !strings.Contains(out, "succeeded") || !strings.Contains(out, "all done") {
		t.Errorf("get: exit %d, stdout %s, stderr %s", code, out, errOut)
	}
	if code, out, errOut = formica("watch", "first", "--no-tty"); code != ExitOK || out != "all done\n" {
		t.Errorf("watch: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	if code, out, errOut = formica("transcript", "first"); code != ExitOK || !strings.Contains(out, "== end: succeeded") {
		t.Errorf("transcript: exit %d, stdout %s, stderr %s", code, out, errOut)
	}
	if code, out, errOut = formica("workers", "--json"); code != ExitOK || !strings.Contains(out, `"slots": 4`) {
		t.Errorf("workers: exit %d, stdout %s, stderr %s", code, out, errOut)
	}
	if code, out, errOut = formica("assets"); code != ExitOK || !strings.HasPrefix(out, "KIND") {
		t.Errorf("assets: exit %d, stdout %s, stderr %s", code, out, errOut)
	}

	held := apitest.Script(t, `responses:
  - tool_calls: [{name: write_file, arguments: '{"path":"out.txt","content":"held"}'}]
  - text: root finished
`)
	run := heldRun(t, ctx, c, held)
	code, out, errOut = formica("approvals", "--json")
	var listed []api.Approval
	if code != ExitOK || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 || listed[0].RunID != run {
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
	if code, _, errOut := formica("approve", listed[0].ID, "--allow"); code != ExitOK {
		t.Fatalf("approve: exit %d, stderr %s", code, errOut)
	}
	select {
	case w := <-watched:
		if w.code != ExitOK || w.out != "root finished\n" {
			t.Errorf("watch: exit %d, stdout %q, stderr:\n%s", w.code, w.out, w.err)
		}
	case <-ctx.Done():
		t.Fatal("watch did not end with the run")
	}

	// A run in a long model call, cancelled once it has started, then
	// resumed and followed, and cancelled again.
	slow := json.RawMessage(`{"name": "slow", "model": "sim", "model_args": {"latency_ms": 60000}}`)
	run, err = c.Submit(ctx, client.SubmitRequest{Task: "take long", Agent: slow})
	if err != nil {
		t.Fatal(err)
	}
	cancelOnStart := func(after uint64) uint64 {
		t.Helper()
		var ended client.Event
		err := c.Events(ctx, run, after, func(seq uint64, e client.Event) error {
			after, ended = seq, e
			if e.Type == "thread.started" {
				if code, _, errOut := formica("cancel", run); code != ExitOK {
					t.Errorf("cancel: exit %d, stderr %s", code, errOut)
				}
			}
			return nil
		})
		if err != nil || ended.Type != client.RunFinished || ended.Status != client.Cancelled {
			t.Fatalf("events = %v, ending with %+v; want the run cancelled", err, ended)
		}
		return after
	}
	last := cancelOnStart(0)
	if r, err := c.Wait(ctx, run); err != nil || r.Status != client.Cancelled {
		t.Fatalf("the cancelled run: %+v, %v", r, err)
	}
	if code, _, errOut := formica("cancel", run); code != ExitFailed || !strings.Contains(errOut, "409") {
		t.Errorf("cancel again: exit %d, stderr %s", code, errOut)
	}
	resumed := make(chan result, 1)
	said := make(chan struct{})
	errs := &announcing{said: said}
	go func() {
		var out bytes.Buffer
		code := Main([]string{"resume", "--wait", "--no-tty", run, "--api", cl.URL, "--token", apitest.Token}, Stdio{Out: &out, Err: errs})
		resumed <- result{code, out.String(), errs.String()}
	}()
	select { // once resumed, the run is queued again
	case <-said:
	case <-ctx.Done():
		t.Fatal("resume --wait did not say which run it follows")
	}
	cancelOnStart(last)
	select {
	case r := <-resumed:
		// Only this execution's tree is drawn: one start of the root.
		if r.code != ExitFailed || !strings.Contains(r.err, "cancelled") || strings.Count(r.err, "(depth 0) started") != 1 {
			t.Errorf("resume --wait: exit %d, stdout %q, stderr:\n%s", r.code, r.out, r.err)
		}
	case <-ctx.Done():
		t.Fatal("resume --wait did not end with the run")
	}

	if code, _, errOut := formica("get", "no-such-run"); code != ExitFailed || !strings.Contains(errOut, "not found") {
		t.Errorf("get of an unknown run: exit %d, stderr %s", code, errOut)
	}
	if code, _, errOut := formica("runs", "--status", "bogus"); code != ExitUsage {
		t.Errorf("runs --status bogus: exit %d, stderr %s", code, errOut)
	}
	var errOutBuf bytes.Buffer
	code = Main([]string{"workers", "--api", cl.URL, "--token", "wrong"}, Stdio{Out: &bytes.Buffer{}, Err: &errOutBuf})
	if code != ExitFailed || !strings.Contains(errOutBuf.String(), "401") {
		t.Errorf("a wrong token: exit %d, stderr %s", code, errOutBuf.String())
	}
}

// announcing is a command's stderr that says when the command has said
// which run it follows.
type announcing struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	said chan struct{}
}

func (a *announcing) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, err := a.buf.Write(p)
	if a.said != nil && strings.Contains(a.buf.String(), "formica: run ") {
		close(a.said)
		a.said = nil
	}
	return n, err
}

func (a *announcing) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.buf.String()
}

// TestTransportChoice: --nats and --api together are refused, a flag on
// the command line wins over the other's variable, and errors of values
// from variables name them.
func TestTransportChoice(t *testing.T) {
	main := func(t *testing.T, env map[string]string, args ...string) (int, string) {
		t.Helper()
		for k, v := range env {
			t.Setenv(k, v)
		}
		var errOut bytes.Buffer
		code := Main(args, Stdio{Out: &bytes.Buffer{}, Err: &errOut})
		return code, errOut.String()
	}
	for _, v := range []string{"FORMICA_NATS", "NATS_URL", "FORMICA_API", "FORMICA_TOKEN", "FORMICA_TOKEN_FILE"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
		want string
	}{
		{"both flags", nil, []string{"workers", "--nats", "nats://127.0.0.1:1", "--api", "http://127.0.0.1:1"},
			ExitUsage, "give --nats or --api, not both"},
		{"both variables", map[string]string{"NATS_URL": "nats://127.0.0.1:1", "FORMICA_API": "http://127.0.0.1:1"},
			[]string{"workers"}, ExitUsage, "give $NATS_URL or $FORMICA_API, not both"},
		{"the flag wins", map[string]string{"FORMICA_NATS": "nats://127.0.0.1:1"},
			[]string{"workers", "--api", "ftp://x"}, ExitUsage, "--api: client: bad config"},
		{"neither", nil, []string{"workers"}, ExitUsage, "no cluster given"},
		{"a bad URL from a variable", map[string]string{"FORMICA_API": "127.0.0.1:8080"},
			[]string{"workers"}, ExitUsage, "$FORMICA_API: client: bad config"},
		{"an empty token file", map[string]string{"FORMICA_API": "http://127.0.0.1:1", "FORMICA_TOKEN_FILE": tokenFile},
			[]string{"workers"}, ExitUsage, "$FORMICA_TOKEN_FILE: " + tokenFile + ": empty secret file"},
		{"token and token file", map[string]string{"FORMICA_TOKEN": "x"},
			[]string{"workers", "--api", "http://127.0.0.1:1", "--token-file", tokenFile}, ExitUsage, "give $FORMICA_TOKEN or --token-file, not both"},
		{"a token for NATS", nil, []string{"workers", "--nats", "nats://127.0.0.1:1", "--token", "x"},
			ExitUsage, "--token and --token-file are for --api"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, errOut := main(t, tc.env, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, tc.code, tc.want)
			}
		})
	}
}
