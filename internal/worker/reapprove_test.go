package worker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// TestApprovalAskedAgainAfterReconnect: an approval whose request or
// answer was lost with the connection it left on (its server died) is
// asked again, for the same call, once the worker's connection has moved
// and nothing was heard since, instead of the thread being cancelled as if
// its coordinator were gone.
func TestApprovalAskedAgainAfterReconnect(t *testing.T) {
	ctx := context.Background()
	wnc, cnc, coord := reaskStack(t)
	var mu sync.Mutex
	var calls []string
	asked := make(chan struct{}, 4)
	sub, err := cnc.Subscribe(wire.SubjectApproval("c1", "w1"), func(m *nats.Msg) {
		var req wire.ApprovalRequest
		if err := wire.DecodeAs(m.Data, wire.TypeApprovalRequest, &req); err != nil {
			t.Errorf("approval request: %v", err)
			return
		}
		mu.Lock()
		calls = append(calls, req.CallID)
		first := len(calls) == 1
		mu.Unlock()
		if first {
			// Heard: a keep-alive, then the answer goes with the dying server.
			m.Respond(wire.MustEncode(wire.TypeProgress, wire.Progress{ThreadID: req.ThreadID}))
			asked <- struct{}{}
			return
		}
		m.Respond(wire.MustEncode(wire.TypeApprovalDecision, policy.Approval{Reason: "asked twice"}))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := cnc.Flush(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "script.yaml")
	if err := os.WriteFile(script, []byte(`
responses:
  - tool_calls: [{name: list_dir, arguments: {path: .}}]
  - text: done
`), 0o600); err != nil {
		t.Fatal(err)
	}
	a := spec.Agent{Name: "lead", Model: "scripted:" + script, Tools: []string{"list_dir"}}
	th := thread.Thread{RunID: "r1", ID: "t1", Path: "root", Name: "lead", Task: "look", Agent: a, Cwd: dir,
		Permissions: policy.Permissions{{Default: policy.Ask}}}
	req := wire.ExecRequest{Thread: th, Coordinator: "c1", Epoch: "e1", Attempt: 1, Token: "tok", Uptime: time.Minute}
	call, err := transport.Request(ctx, coord, wire.SubjectExec("w1"), wire.Message(wire.TypeExecRequest, req))
	if err != nil {
		t.Fatal(err)
	}
	defer call.Close()
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		t.Fatal("the thread did not ask for approval")
	}
	if err := wnc.ForceReconnect(); err != nil { // its server died; it is on another now
		t.Fatal(err)
	}
	if er := awaitResult(t, ctx, call, 20*time.Second); er.Result.Status != event.Succeeded {
		t.Errorf("thread ended %s (%s), want it to go on with the decision asked again", er.Result.Status, er.Result.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 || calls[0] != calls[1] || !strings.Contains(calls[0], "call") {
		t.Errorf("approval requests for calls %q, want the same call twice", calls)
	}
}
