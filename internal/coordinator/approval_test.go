package coordinator

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/wire"
)

// TestApprovalAskedOncePerCall: requests for one tool call, however many
// and whenever they come in the run, make one question to the approver and
// all get its decision; another call is asked about on its own.
func TestApprovalAskedOncePerCall(t *testing.T) {
	ctx := context.Background()
	srv, err := broker.StartServer(ctx, broker.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := srv.Connect("coordinator")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c, err := New(Config{Conn: nc, Cwd: os.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.stopSubs()
	var questions atomic.Int64
	release := make(chan struct{})
	sub, err := nc.Subscribe("test.approver", func(m *nats.Msg) {
		var req policy.ApprovalRequest
		if err := wire.DecodeAs(m.Data, wire.TypeApprovalRequest, &req); err != nil {
			t.Errorf("approver: %v", err)
			return
		}
		questions.Add(1)
		go func() {
			<-release
			m.Respond(wire.MustEncode(wire.TypeApprovalDecision, policy.Approval{Allow: req.CallID == "1/call_a", Reason: req.CallID}))
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	rn := testRun(t)
	rn.approver = "test.approver"

	req := policy.ApprovalRequest{RunID: "r1", ThreadID: "t1", Tool: "bash", Arguments: `{"command":"ls"}`, CallID: "1/call_a"}
	other := req
	other.CallID = "1/call_b"
	var wg sync.WaitGroup
	var announced atomic.Int32
	announce := func() { announced.Add(1) }
	got := make([]policy.Approval, 4)
	for i, r := range []policy.ApprovalRequest{req, req, req, other} {
		wg.Go(func() { got[i] = c.approval(rn, r, announce) })
	}
	waitUntil(t, "both calls asked about", func() bool { return questions.Load() == 2 })
	close(release)
	wg.Wait()
	if n := announced.Load(); n != 4 {
		t.Errorf("%d requests announced, want each of the 4 once", n)
	}
	for i, a := range got[:3] {
		if !a.Allow || a.Reason != "1/call_a" {
			t.Errorf("request %d for call a: %+v, want the one decision for call a", i, a)
		}
	}
	if got[3].Allow || got[3].Reason != "1/call_b" {
		t.Errorf("call b: %+v, want its own decision", got[3])
	}
	if late := c.approval(rn, req, func() {}); !late.Allow || late.Reason != "1/call_a" {
		t.Errorf("call a asked again after its decision: %+v", late)
	}
	if n := questions.Load(); n != 2 {
		t.Errorf("the approver was asked %d times, want once per call (2)", n)
	}

	// A repeat waiting on a decision that never comes ends with the run.
	pending := req
	pending.CallID = "2/call_c"
	sub.Unsubscribe()
	var held atomic.Int64
	hold, err := nc.Subscribe("test.approver", func(*nats.Msg) { held.Add(1) }) // never answers
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Unsubscribe()
	go c.approval(rn, pending, func() {})
	waitUntil(t, "call c asked about", func() bool { return held.Load() > 0 })
	done := make(chan policy.Approval, 1)
	go func() { done <- c.approval(rn, pending, func() {}) }()
	rn.cancel(errors.New("test over"))
	select {
	case a := <-done:
		if a.Allow {
			t.Errorf("a repeat after the run ended: %+v", a)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a repeat outlived its run")
	}
	if n := held.Load(); n != 1 {
		t.Errorf("the approver was asked %d times about one call, want once", n)
	}
}

// waitUntil polls ok, failing the test after 30 s.
func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
	}
}
