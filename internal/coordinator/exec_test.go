package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/transport/memtransport"
	"github.com/formica-run/formica/internal/wire"
)

// The placement outcomes, each on the fake clock of a synctest bubble and an
// in-memory transport: the tests' workers are handlers on their exec
// subjects, and their heartbeats are the test's calls of registry.heartbeat.

const testInterval = time.Second

// execRig is a coordinator as far as placing threads goes, with its run.
type execRig struct {
	t   *testing.T
	net *memtransport.Network
	c   *Coordinator
	rn  *run
}

func newExecRig(t *testing.T, cfg Config) *execRig {
	// The event publisher's goroutine lingers a while after its last
	// event: the bubble waits for it.
	t.Cleanup(func() { time.Sleep(2 * publisherLinger) })
	net := memtransport.NewNetwork()
	tr, execTr := net.Transport(memtransport.Config{}), net.Transport(memtransport.Config{})
	t.Cleanup(func() { tr.Close(); execTr.Close() })
	cfg.ID = "c1"
	cfg.HeartbeatInterval = testInterval
	cfg.Now = time.Now
	cfg.Logger = slog.New(slog.DiscardHandler)
	if cfg.PlacementTimeout == 0 {
		cfg.PlacementTimeout = time.Minute
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	c := &Coordinator{cfg: cfg, tr: tr, execTr: execTr, epoch: "e1", born: time.Now(), registry: newRegistry(time.Now),
		runs: map[string]*run{}, quotas: newQuotas(), stop: make(chan struct{}),
		alive: keepalive{repliers: map[*alivePing]struct{}{}}}
	c.events = newPublisher(maxQueuedEvents, func(*event.Event) {}, nil)
	c.loops.Go(c.keepAlive)
	t.Cleanup(func() { close(c.stop); c.loops.Wait() })
	ledger, err := limits.New(limits.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rn := newRun("r1", ledger, limits.NewTree(limits.Budget{}, time.Now), "")
	c.runs[rn.id] = rn
	t.Cleanup(func() { rn.cancel(errors.New("test over")) })
	return &execRig{t: t, net: net, c: c, rn: rn}
}

// join registers worker id as a heartbeat would.
func (g *execRig) join(id string) {
	g.c.registry.heartbeat(wire.WorkerHeartbeat{ID: id, Slots: 4, Interval: testInterval, Started: time.Unix(1, 0)})
}

// worker serves worker id's exec subject with h, which gets the request.
func (g *execRig) worker(id string, h func(req wire.ExecRequest, r transport.Replier)) {
	g.t.Helper()
	g.workerCtx(id, func(_ context.Context, req wire.ExecRequest, r transport.Replier) { h(req, r) })
}

// workerCtx is worker for a handler that heeds its context, which ends
// when the test does.
func (g *execRig) workerCtx(id string, h func(ctx context.Context, req wire.ExecRequest, r transport.Replier)) {
	g.t.Helper()
	tr := g.net.Transport(memtransport.Config{})
	g.t.Cleanup(func() { tr.Close() })
	if _, err := tr.Serve(wire.SubjectExec(id), "", 0, func(ctx context.Context, m wire.Msg, r transport.Replier) {
		var req wire.ExecRequest
		if err := wire.DecodeAs(m.Data, wire.TypeExecRequest, &req); err != nil {
			g.t.Errorf("worker %s: %v", id, err)
			return
		}
		h(ctx, req, r)
	}); err != nil {
		g.t.Fatal(err)
	}
}

// cancels counts the cancels sent to worker id and calls f with each.
func (g *execRig) cancels(id string, f func(wire.Cancel)) *atomic.Int32 {
	g.t.Helper()
	var n atomic.Int32
	tr := g.net.Transport(memtransport.Config{})
	g.t.Cleanup(func() { tr.Close() })
	if _, err := tr.Serve(wire.SubjectCancel(id), "", 0, func(_ context.Context, m wire.Msg, _ transport.Replier) {
		var cn wire.Cancel
		if wire.DecodeAs(m.Data, wire.TypeCancel, &cn) == nil {
			n.Add(1)
			if f != nil {
				f(cn)
			}
		}
	}); err != nil {
		g.t.Fatal(err)
	}
	return &n
}

// execResult is what a worker answers at a thread's end.
func execResult(req wire.ExecRequest, worker string, res thread.Result) wire.Msg {
	return wire.Message(wire.TypeExecResult, wire.ExecResult{ThreadID: req.Thread.ID, Worker: worker, Token: req.Token, Result: res})
}

func accepted(worker string) wire.Msg {
	return wire.Message(wire.TypeExecAccepted, wire.ExecAccepted{Worker: worker})
}

// ends runs the thread and returns its end, and how long it took.
type end struct {
	res      thread.Result
	reported bool
	took     time.Duration
}

func testThread() thread.Thread {
	return thread.Thread{RunID: "r1", ID: "r1-root", Path: "root", Name: "root", Task: "t"}
}

func (g *execRig) exec() (*threadRec, <-chan end) {
	th := &threadRec{thread: testThread()}
	t := g.rn.add(th, nil, g.rn.budget.Root())
	out := make(chan end, 1)
	begun := time.Now()
	go func() {
		res, reported := g.c.execThread(g.rn, t)
		out <- end{res, reported, time.Since(begun)}
	}()
	return t, out
}

func TestPlacementEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newExecRig(t, Config{})
		g.join("w1")
		g.worker("w1", func(req wire.ExecRequest, r transport.Replier) {
			r.Reply(accepted("w1"))
			// A thread longer than SilencePatience: its keep-alives keep
			// it placed.
			for range 2 * SilencePatience / testInterval {
				time.Sleep(testInterval)
				r.Reply(wire.Message(wire.TypeProgress, wire.Progress{ThreadID: req.Thread.ID, Token: req.Token}))
			}
			r.Reply(execResult(req, "w1", thread.Result{Status: event.Succeeded, Output: "done"}))
		})
		go keepBeating(t.Context(), g, "w1")
		_, out := g.exec()
		e := <-out
		if e.res.Status != event.Succeeded || e.res.Output != "done" || !e.reported {
			t.Fatalf("end %+v, want the worker's result, reported", e)
		}
		if e.took != 2*SilencePatience {
			t.Errorf("ended after %v, want the worker's %v", e.took, 2*SilencePatience)
		}
	})
}

func TestPlacementBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newExecRig(t, Config{})
		g.join("w1")
		g.worker("w1", func(_ wire.ExecRequest, r transport.Replier) {
			r.Reply(wire.Message(wire.TypeExecBusy, wire.ExecBusy{Worker: "w1"}))
		})
		g.join("w2")
		g.worker("w2", func(req wire.ExecRequest, r transport.Replier) {
			r.Reply(execResult(req, "w2", thread.Result{Status: event.Succeeded, Output: "w2"}))
		})
		// w1, less loaded, is the first choice; busy, it cools and the
		// thread goes to w2.
		g.c.registry.unpark("w2")
		_, out := g.exec()
		if e := <-out; e.res.Output != "w2" {
			t.Fatalf("end %+v, want w2's result", e)
		}
	})
}

func TestPlacementGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newExecRig(t, Config{})
		g.join("w1") // registered, but nobody serves its subject any more
		_, out := g.exec()
		synctest.Wait()
		g.worker("w2", func(req wire.ExecRequest, r transport.Replier) {
			r.Reply(execResult(req, "w2", thread.Result{Status: event.Succeeded, Output: "w2"}))
		})
		g.join("w2") // served before it is known, or a placement there finds nobody
		e := <-out
		if e.res.Output != "w2" {
			t.Fatalf("end %+v, want w2's result", e)
		}
		if g.c.registry.forget("w1") {
			t.Error("worker w1 nobody answered for is still registered")
		}
		if e.took != 0 {
			t.Errorf("placing again took %v; a gone worker is given up at once", e.took)
		}
	})
}

// A placement silent for the loss window, on a worker whose heartbeats
// stopped too, is lost: fenced, and the thread placed again.
func TestPlacementLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newExecRig(t, Config{})
		g.join("w1")
		g.worker("w1", func(_ wire.ExecRequest, r transport.Replier) { r.Reply(accepted("w1")) })
		_, out := g.exec()
		synctest.Wait()
		g.worker("w2", func(req wire.ExecRequest, r transport.Replier) {
			r.Reply(execResult(req, "w2", thread.Result{Status: event.Succeeded, Output: "w2"}))
		})
		g.join("w2")
		go keepBeating(t.Context(), g, "w2")
		e := <-out
		if e.res.Output != "w2" {
			t.Fatalf("end %+v, want w2's result", e)
		}
		// Its worker's last heartbeat is fresh for a loss window too.
		if want := MissedHeartbeats * testInterval; e.took < want || e.took > want+testInterval {
			t.Errorf("lost after %v, want the loss window %v and at most a heartbeat more", e.took, want)
		}
		fenced := g.c.fencedNow()
		if len(fenced) != 1 || fenced[0].Worker != "w1" || fenced[0].Attempt != 1 {
			t.Errorf("fenced %+v, want w1's first attempt", fenced)
		}
	})
}

// A silent placement on a worker whose own heartbeats still come is borne
// for SilencePatience; then it is lost, and past MaxAttempts the thread
// fails.
func TestPlacementPatience(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newExecRig(t, Config{MaxAttempts: 1})
		g.join("w1")
		g.worker("w1", func(_ wire.ExecRequest, r transport.Replier) { r.Reply(accepted("w1")) })
		go keepBeating(t.Context(), g, "w1")
		_, out := g.exec()
		e := <-out
		if e.res.Status != event.Failed || e.res.Error != "worker lost" || e.reported {
			t.Fatalf("end %+v, want failed: worker lost", e)
		}
		if e.took < SilencePatience || e.took > SilencePatience+MissedHeartbeats*testInterval {
			t.Errorf("lost after %v, want SilencePatience (%v) and at most a loss window more", e.took, SilencePatience)
		}
	})
}

// A placement check that vouched for a silent placement keeps it for a
// loss window from then.
func TestPlacementVouched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newExecRig(t, Config{MaxAttempts: 1})
		g.join("w1")
		tok := make(chan string, 1)
		g.worker("w1", func(req wire.ExecRequest, r transport.Replier) {
			r.Reply(accepted("w1"))
			tok <- req.Token
		})
		th, out := g.exec()
		token := <-tok
		time.Sleep(2 * testInterval)
		if err := g.rn.vouch(th.thread.ID, "w1", token, time.Now()); err != nil {
			t.Fatal(err)
		}
		e := <-out
		if want := (2 + MissedHeartbeats) * testInterval; e.took != want {
			t.Errorf("lost after %v, want a loss window after the check (%v)", e.took, want)
		}
	})
}

// A cancelled thread's worker is told, and its final result is the
// thread's end.
func TestPlacementCancelAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newExecRig(t, Config{})
		g.join("w1")
		type placed struct {
			req wire.ExecRequest
			r   transport.Replier
		}
		running := make(chan placed, 1)
		g.worker("w1", func(req wire.ExecRequest, r transport.Replier) {
			r.Reply(accepted("w1"))
			running <- placed{req, r}
		})
		go keepBeating(t.Context(), g, "w1")
		_, out := g.exec()
		p := <-running
		n := g.cancels("w1", func(cn wire.Cancel) {
			if cn.Reason != "stop it" || len(cn.ThreadIDs) != 1 || cn.ThreadIDs[0] != p.req.Thread.ID {
				t.Errorf("cancel %+v", cn)
			}
			p.r.Reply(execResult(p.req, "w1", thread.Result{Status: event.Cancelled, Error: "stopped by the worker"}))
		})
		g.rn.cancel(errors.New("stop it"))
		e := <-out
		if e.res.Status != event.Cancelled || e.res.Error != "stopped by the worker" || !e.reported {
			t.Fatalf("end %+v, want the worker's cancelled result", e)
		}
		if n.Load() != 1 {
			t.Errorf("%d cancels sent, want 1", n.Load())
		}
	})
}

// A cancel the worker never answers ends the thread as cancelled after a
// loss window.
func TestPlacementCancelUnanswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newExecRig(t, Config{})
		g.join("w1")
		g.worker("w1", func(_ wire.ExecRequest, r transport.Replier) { r.Reply(accepted("w1")) })
		n := g.cancels("w1", nil)
		go keepBeating(t.Context(), g, "w1")
		_, out := g.exec()
		synctest.Wait()
		cancelled := time.Now()
		g.rn.cancel(errors.New("stop it"))
		e := <-out
		if e.res.Status != event.Cancelled || e.res.Error != "stop it" || e.reported {
			t.Fatalf("end %+v, want cancelled: stop it, not reported", e)
		}
		if waited, want := time.Since(cancelled), MissedHeartbeats*testInterval; waited != want {
			t.Errorf("gave up on the cancel after %v, want the loss window %v", waited, want)
		}
		if n.Load() != 1 {
			t.Errorf("%d cancels sent, want 1", n.Load())
		}
	})
}

// A worker that does not hold the setup the request names gets the request
// again, once, with the setup; a second miss fails the thread.
func TestPlacementSetupMissing(t *testing.T) {
	for _, takes := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			g := newExecRig(t, Config{})
			g.join("w1")
			th := testThread()
			g.c.registry.heldSetup("w1", newThreadSetup(&th).hash, true)
			var asked atomic.Int32
			g.worker("w1", func(req wire.ExecRequest, r transport.Replier) {
				asked.Add(1)
				if len(req.Setup) == 0 || !takes {
					r.Reply(wire.Message(wire.TypeExecSetupMissing, wire.ExecSetupMissing{Worker: "w1", SetupHash: req.SetupHash}))
					return
				}
				r.Reply(execResult(req, "w1", thread.Result{Status: event.Succeeded, Output: "ok"}))
			})
			_, out := g.exec()
			e := <-out
			switch {
			case takes && e.res.Output != "ok":
				t.Errorf("end %+v, want the result of the request with the setup", e)
			case !takes && (e.res.Status != event.Failed || !strings.Contains(e.res.Error, "did not take the thread's setup")):
				t.Errorf("end %+v, want failed: did not take the setup", e)
			}
			if asked.Load() != 2 {
				t.Errorf("asked %d times, want 2", asked.Load())
			}
		})
	}
}

// A worker's error reply fails the thread; no worker at all fails it after
// the placement timeout.
func TestPlacementRefusedAndTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newExecRig(t, Config{})
		g.join("w1")
		g.worker("w1", func(_ wire.ExecRequest, r transport.Replier) {
			r.Reply(wire.ErrorMsg(wire.CodeBadRequest, "no such model"))
		})
		_, out := g.exec()
		if e := <-out; e.res.Status != event.Failed || !strings.Contains(e.res.Error, "no such model") {
			t.Errorf("end %+v, want failed with the worker's error", e)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		g := newExecRig(t, Config{PlacementTimeout: 5 * time.Minute})
		_, out := g.exec()
		e := <-out
		if e.res.Status != event.Failed || !strings.Contains(e.res.Error, "no worker available") {
			t.Errorf("end %+v, want failed: no worker available", e)
		}
		if e.took != 5*time.Minute {
			t.Errorf("gave up after %v, want the placement timeout", e.took)
		}
	})
}

// keepBeating sends worker id's heartbeats until ctx ends.
func keepBeating(ctx context.Context, g *execRig, id string) {
	t := time.NewTicker(testInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.join(id)
		}
	}
}

// TestInDoubtRecorded: the calls a worker reports found in doubt (a
// tool.result in_doubt, on its progress or with its result) count in the
// run's record; other tool results do not.
func TestInDoubtRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newExecRig(t, Config{})
		g.join("w1")
		g.worker("w1", func(req wire.ExecRequest, r transport.Replier) {
			r.Reply(accepted("w1"))
			r.Reply(wire.Message(wire.TypeProgress, wire.Progress{ThreadID: req.Thread.ID, Token: req.Token, Events: wire.Events{
				{Type: event.ToolResult, Tool: "bash", CallID: "c1", Output: "Tool call in doubt", InDoubt: true},
				{Type: event.ToolResult, Tool: "read_file", CallID: "c2", Output: "text"},
			}}))
			r.Reply(wire.Message(wire.TypeExecResult, wire.ExecResult{ThreadID: req.Thread.ID, Worker: "w1", Token: req.Token,
				Result: thread.Result{Status: event.Succeeded, Output: "done"},
				Events: wire.Events{{Type: event.ToolResult, Tool: "pay", CallID: "c3", Output: "Tool call in doubt", InDoubt: true}}}))
		})
		_, out := g.exec()
		if e := <-out; e.res.Status != event.Succeeded {
			t.Fatalf("end %+v, want succeeded", e)
		}
		rec := g.rn.rec.Snapshot()
		if len(rec.Threads) != 1 || rec.Threads[0].InDoubt != 2 {
			t.Errorf("record threads %+v, want the root with 2 calls in doubt", rec.Threads)
		}
		if n := rec.Sum().InDoubt; n != 2 {
			t.Errorf("totals count %d in doubt, want 2", n)
		}
	})
}
