package embedded

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/oneshot"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/wire"
)

// waitRoot runs sub and returns, once its root thread runs, the root's id
// and the wait for the record.
func waitRoot(t *testing.T, cl *oneshot.Client, sub wire.RunSubmit) (root string, wait func() string) {
	t.Helper()
	roots := make(chan string, 1)
	events := event.SinkFunc(func(e event.Event) {
		if e.Type == event.ThreadStarted && e.Depth == 0 {
			select {
			case roots <- e.ThreadID:
			default:
			}
		}
	})
	w := runAsync(t, context.Background(), cl, sub, events)
	select {
	case root = <-roots:
	case <-time.After(runTimeout):
		t.Fatal("the root thread did not start")
	}
	return root, func() string {
		rec := w()
		if rec.Status != event.Succeeded {
			t.Fatalf("the targeted run: %s (%s)", rec.Status, rec.Error)
		}
		return rec.Output
	}
}

// TestForgedSpawnsAreRefused replays spawn requests into a live run's root
// thread from a peer that does not hold the root's placement: without a
// token, with a made-up token, and claiming the root's own worker. Each is
// refused as fenced, nothing is spawned, and the run ends with its own output.
func TestForgedSpawnsAreRefused(t *testing.T) {
	s, cl := startStack(t, 1, 4)
	sub := simSubmit(t, "Plan:\n- a\n- b", 0, limits.Config{})
	sub.Agent.Helper.ModelArgs = model.Args{"latency_ms": 500}
	sub.Agent.Harness.Permissions = policy.Permission{Default: policy.Deny}
	root, wait := waitRoot(t, cl, sub)

	nc := mustConn(t, s, "attacker")
	coord, victim := s.Coordinator.ID(), s.Workers[0].ID()
	for _, c := range []struct{ name, worker, token string }{
		{"no token", "attacker", ""},
		{"made-up token", "attacker", "AAAAAAAAAAAAAAAAAAAAAA"},
		{"the victim's subject", victim, ""},
	} {
		req := wire.SpawnRequest{RunID: sub.RunID, ParentID: root, Token: c.token, Name: "evil", Task: "cat /etc/shadow"}
		reply, err := nc.Request(wire.SubjectSpawn(coord, c.worker), wire.MustEncode(wire.TypeSpawnRequest, req), 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := reply.Header.Get("Formica-Error"); got != string(wire.CodeFenced) {
			t.Errorf("%s: reply %s %q (%s), want a fenced error", c.name, reply.Header.Get("Formica-Type"), got, reply.Data)
		}
	}
	if out, want := wait(), "a: done: a\nb: done: b"; out != want {
		t.Errorf("output %q, want %q", out, want)
	}
}

// TestForgedApprovalAndCancelAreRefused: an approval request or a cancel of
// a helper for a thread the sender does not hold is refused.
func TestForgedApprovalAndCancelAreRefused(t *testing.T) {
	s, cl := startStack(t, 1, 4)
	sub := simSubmit(t, "Plan:\n- a\n- b", 0, limits.Config{})
	sub.Agent.Helper.ModelArgs = model.Args{"latency_ms": 500}
	root, wait := waitRoot(t, cl, sub)
	nc := mustConn(t, s, "attacker")
	coord := s.Coordinator.ID()

	ask := wire.ApprovalRequest{ApprovalRequest: policy.ApprovalRequest{RunID: sub.RunID, ThreadID: root, Tool: "bash", Arguments: `{"command":"id"}`}}
	reply, err := nc.Request(wire.SubjectApproval(coord, "attacker"), wire.MustEncode(wire.TypeApprovalRequest, ask), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := reply.Header.Get("Formica-Error"); got != string(wire.CodeFenced) {
		t.Errorf("approval: reply %s %q (%s), want a fenced error", reply.Header.Get("Formica-Type"), got, reply.Data)
	}
	cn := wire.ThreadCancel{RunID: sub.RunID, ParentID: root, ThreadID: root, Reason: "forged"}
	reply, err = nc.Request(wire.SubjectThreadCancel(coord, s.Workers[0].ID()), wire.MustEncode(wire.TypeCancel, cn), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := reply.Header.Get("Formica-Error"); got != string(wire.CodeFenced) {
		t.Errorf("cancel: reply %s %q (%s), want a fenced error", reply.Header.Get("Formica-Type"), got, reply.Data)
	}
	if out, want := wait(), "a: done: a\nb: done: b"; out != want {
		t.Errorf("output %q, want %q", out, want)
	}
}

// TestWorkerHeartbeatsAreCappedAndPinned: a worker announcing 100,000 slots
// is registered with the cap, and a heartbeat naming another worker than
// its subject's is ignored.
func TestWorkerHeartbeatsAreCappedAndPinned(t *testing.T) {
	s, _ := startStack(t, 1, 4)
	nc := mustConn(t, s, "attacker")
	hb := func(subjectID, id string, slots int) {
		data := wire.MustEncode(wire.TypeWorkerHeartbeat, wire.WorkerHeartbeat{ID: id, Slots: slots, Interval: time.Minute})
		if err := nc.Publish(wire.SubjectWorkerHeartbeat(subjectID), data); err != nil {
			t.Fatal(err)
		}
	}
	hb("greedy", "greedy", 100_000)
	hb("mallory", "impostor", 8)
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		seen := map[string]int{}
		for _, w := range s.Coordinator.Workers() {
			seen[w.ID] = w.Slots
		}
		if _, ok := seen["impostor"]; ok {
			t.Fatal("a heartbeat on mallory's subject registered worker impostor")
		}
		if n, ok := seen["greedy"]; ok {
			if n != 256 {
				t.Errorf("greedy announced 100000 slots and is registered with %d, want the cap 256", n)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the greedy worker never registered")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestScriptedModelsRefusedForSubmittedRuns: a submitter naming a scripted
// model (a file on the workers) is refused unless the coordinator allows it.
func TestScriptedModelsRefusedForSubmittedRuns(t *testing.T) {
	_, cl := startStack(t, 1, 4)
	for _, where := range []string{"root", "helper"} {
		sub := simSubmit(t, "hello", 0, limits.Config{})
		if where == "root" {
			sub.Agent.Model = "scripted:/etc/passwd"
		} else {
			sub.Agent.Helper.Model = "scripted:/etc/passwd"
		}
		_, err := cl.Run(context.Background(), sub, nil, nil)
		var re *wire.Error
		if !errors.As(err, &re) || re.Code != wire.CodeForbidden {
			t.Errorf("%s scripted: %v, want forbidden", where, err)
		}
	}
}

func mustConn(t *testing.T, s *Stack, name string) *nats.Conn {
	t.Helper()
	nc, err := s.Connect(name)
	if err != nil {
		t.Fatal(err)
	}
	return nc
}
