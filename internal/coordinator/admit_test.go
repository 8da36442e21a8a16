package coordinator

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/transport/memtransport"
	"github.com/formica-run/formica/internal/wire"
)

// Spawn admission, on a fake clock: a parent placed on worker w1 asks the
// coordinator for helpers as its worker would, and the helpers run on w1.

// spawnRig is an execRig whose run has a root placed on w1, and whose
// coordinator serves w1's spawns.
type spawnRig struct {
	*execRig
	root  *threadRec
	token string
	tr    *memtransport.Transport // w1's
}

func newSpawnRig(t *testing.T, lim limits.Config, rootDepth int) *spawnRig {
	g := newExecRig(t, Config{})
	ledger, err := limits.New(lim)
	if err != nil {
		t.Fatal(err)
	}
	g.rn.ledger = ledger
	g.join("w1")
	th := testThread()
	th.Depth = rootDepth
	th.Agent.Name = "root"
	root := g.rn.add(&threadRec{thread: th}, nil, g.rn.budget.Root())
	tok := g.rn.place(root, "w1")
	if _, err := g.c.tr.Serve(wire.SubjectSpawn("c1", "w1"), "", 0, g.c.handleSpawn); err != nil {
		t.Fatal(err)
	}
	tr := g.net.Transport(memtransport.Config{})
	t.Cleanup(func() { tr.Close() })
	return &spawnRig{execRig: g, root: root, token: tok, tr: tr}
}

// spawnReply is what the parent heard of one spawn.
type spawnReply struct {
	named  string // the helper the keep-alives named
	result wire.SpawnResult
	err    error
}

// spawn asks for the helper of the root's call, as its worker does, and
// waits for the answer.
func (g *spawnRig) spawn(call, token string) spawnReply {
	req := wire.SpawnRequest{RunID: "r1", ParentID: g.root.thread.ID, Token: token, CallID: journal.CallKey(1, call),
		Name: "helper", Task: "help"}
	var out spawnReply
	l := transport.Long{
		Subject: wire.SubjectSpawn("c1", "w1"),
		Request: func() wire.Msg { return wire.Message(wire.TypeSpawnRequest, req) },
		Reply: func(m wire.Msg) transport.Verdict {
			switch wire.Type(m.Type) {
			case wire.TypeProgress:
				var p wire.Progress
				if wire.DecodeAs(m.Data, wire.TypeProgress, &p) == nil && p.ThreadID != "" {
					out.named = p.ThreadID
				}
				return transport.Alive
			case wire.TypeSpawnResult:
				out.err = wire.DecodeAs(m.Data, wire.TypeSpawnResult, &out.result)
			default:
				out.err = wire.MsgError(m)
			}
			return transport.Final
		},
		Idle: func() time.Duration { return MissedHeartbeats * testInterval },
	}
	if err := l.Ask(context.Background(), g.tr); err != nil {
		out.err = err
	}
	return out
}

// helpers makes w1 run helpers: each answers after d with its task.
func (g *spawnRig) helpers(d time.Duration) *atomic.Int32 {
	var n atomic.Int32
	g.workerCtx("w1", func(ctx context.Context, req wire.ExecRequest, r transport.Replier) {
		n.Add(1)
		r.Reply(accepted("w1"))
		for range d / testInterval {
			select {
			case <-ctx.Done():
				return
			case <-time.After(testInterval):
			}
			r.Reply(wire.Message(wire.TypeProgress, wire.Progress{ThreadID: req.Thread.ID, Token: req.Token}))
		}
		r.Reply(execResult(req, "w1", thread.Result{Status: event.Succeeded, Output: "did: " + req.Thread.Task}))
	})
	go keepBeating(g.t.Context(), g.execRig, "w1")
	return &n
}

func TestSpawnAdmitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newSpawnRig(t, limits.Config{}, 0)
		g.helpers(10 * time.Second)
		got := g.spawn("call-1", g.token)
		want := journal.ThreadID("r1", g.root.thread.ID, journal.CallKey(1, "call-1"))
		if got.err != nil || got.result.ThreadID != want || got.result.Result.Output != "did: help" {
			t.Fatalf("spawn: %+v (%v), want helper %s output", got, got.err, want)
		}
		if got.named != want {
			t.Errorf("keep-alives named %q, want %s", got.named, want)
		}
		h := g.rn.thread(want)
		if h == nil || h.thread.Depth != 1 || h.thread.ParentID != g.root.thread.ID || h.thread.Path != "root/helper" {
			t.Fatalf("helper record %+v", h)
		}
	})
}

// The same call asked twice (again after its worker's connection moved)
// is one helper, and both asks get its result.
func TestSpawnAskedTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newSpawnRig(t, limits.Config{}, 0)
		runs := g.helpers(10 * time.Second)
		first := make(chan spawnReply, 1)
		go func() { first <- g.spawn("call-1", g.token) }()
		time.Sleep(5 * time.Second)
		second := g.spawn("call-1", g.token)
		a := <-first
		if a.err != nil || second.err != nil || a.result.ThreadID != second.result.ThreadID || second.result.Result.Output != "did: help" {
			t.Fatalf("asks: %+v and %+v, want one helper's result twice", a, second)
		}
		if runs.Load() != 1 {
			t.Errorf("%d helpers ran, want 1", runs.Load())
		}
	})
}

// Past the depth or thread limit a spawn is refused with the exact reason;
// a spawn from a parent that is not placed there under that token is
// refused as fenced.
func TestSpawnRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newSpawnRig(t, limits.Config{MaxDepth: 2}, 2)
		g.helpers(0)
		got := g.spawn("call-1", g.token)
		if got.err != nil || got.result.Refusal != limits.ReasonDepth {
			t.Fatalf("spawn at the depth limit: %+v, want refused (depth)", got)
		}
		if msg := (&limits.Refusal{Reason: got.result.Refusal}).Error(); msg != "Agent depth limit reached. Solve the task yourself." {
			t.Errorf("refusal reads %q", msg)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		g := newSpawnRig(t, limits.Config{MaxThreads: 1}, 0)
		g.helpers(time.Minute)
		first := make(chan spawnReply, 1)
		go func() { first <- g.spawn("call-1", g.token) }()
		time.Sleep(10 * time.Second)
		got := g.spawn("call-2", g.token)
		if got.err != nil || got.result.Refusal != limits.ReasonThreads {
			t.Fatalf("spawn past the thread limit: %+v, want refused (threads)", got)
		}
		if msg := (&limits.Refusal{Reason: got.result.Refusal}).Error(); msg != "Agent thread limit reached. Solve the task yourself." {
			t.Errorf("refusal reads %q", msg)
		}
		if a := <-first; a.err != nil || a.result.Result.Output != "did: help" {
			t.Errorf("the admitted helper: %+v", a)
		}
		// Its slot is free again once it ended.
		if got := g.spawn("call-3", g.token); got.err != nil || got.result.Refusal != "" {
			t.Errorf("spawn after the helper ended: %+v, want admitted", got)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		g := newSpawnRig(t, limits.Config{}, 0)
		g.helpers(0)
		if got := g.spawn("call-1", "forged"); !errors.Is(got.err, wire.ErrFenced) {
			t.Errorf("spawn under another token: %+v, want fenced", got)
		}
	})
}
