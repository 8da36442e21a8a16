package worker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/transport/natstransport"
	"github.com/formica-run/formica/internal/wire"
)

// byHash is req as a coordinator sends it once the worker holds its setup;
// withSetup adds the setup.
func byHash(req wire.ExecRequest, withSetup bool) wire.ExecRequest {
	hash, body := wire.EncodeSetup(&req.Thread)
	wire.StripSetup(&req.Thread)
	req.SetupHash = hash
	if withSetup {
		req.Setup = body
	}
	return req
}

// place sends req and returns the worker's first answer and, if it took
// the thread, its result.
func place(t *testing.T, ctx context.Context, coord *natstransport.Transport, req wire.ExecRequest) (first wire.Msg, res *wire.ExecResult) {
	t.Helper()
	call, err := transport.Request(ctx, coord, wire.SubjectExec("w1"), wire.Message(wire.TypeExecRequest, req))
	if err != nil {
		t.Fatal(err)
	}
	defer call.Close()
	first, err = call.Next(ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("thread %s: %v", req.Thread.ID, err)
	}
	if first.Type != string(wire.TypeExecAccepted) {
		return first, nil
	}
	er := awaitResult(t, ctx, call, 10*time.Second)
	return first, &er
}

// awaitResult reads a placement's replies until its result, waiting at
// most idle for each.
func awaitResult(t *testing.T, ctx context.Context, call transport.Call, idle time.Duration) wire.ExecResult {
	t.Helper()
	for {
		m, err := call.Next(ctx, idle)
		if err != nil {
			t.Fatalf("no result: %v", err)
		}
		if m.Type != string(wire.TypeExecResult) {
			continue
		}
		var er wire.ExecResult
		if err := wire.DecodeAs(m.Data, wire.TypeExecResult, &er); err != nil {
			t.Fatal(err)
		}
		return er
	}
}

// TestSetupByHash: a placement naming a setup the worker does not hold is
// answered setup_missing and takes no slot; one carrying its setup runs, and
// from then on placements naming that setup by its hash alone run with it. A
// setup that does not hash to the name it comes under is refused, and not
// kept: the hash still names nothing.
func TestSetupByHash(t *testing.T) {
	w, coord := startWorker(t)
	ctx, stop := context.WithTimeout(context.Background(), 60*time.Second)
	defer stop()
	cwd := t.TempDir()

	first, _ := place(t, ctx, coord, byHash(execIn(cwd, "t1", 0), false))
	if first.Type != string(wire.TypeExecSetupMissing) {
		t.Fatalf("hash alone before the setup came: %s, want %s", first.Type, wire.TypeExecSetupMissing)
	}
	var missing wire.ExecSetupMissing
	if err := wire.DecodeAs(first.Data, wire.TypeExecSetupMissing, &missing); err != nil || missing.Worker != "w1" || missing.SetupHash == "" {
		t.Errorf("setup_missing = %+v, %v", missing, err)
	}

	// A setup under another setup's hash: refused, and nothing is kept.
	forged := byHash(execIn(cwd, "t2", 0), true)
	other := execIn(cwd, "t2", 0)
	other.Thread.Agent.Instructions = "do something else"
	forged.SetupHash, _ = wire.EncodeSetup(&other.Thread)
	first, _ = place(t, ctx, coord, forged)
	err := wire.MsgError(first)
	var remote *wire.Error
	if !errors.As(err, &remote) || remote.Code != wire.CodeBadRequest {
		t.Fatalf("setup under a hash it does not have: %s %v, want a bad_request error", first.Type, err)
	}
	forged.Setup = nil
	if first, _ = place(t, ctx, coord, forged); first.Type != string(wire.TypeExecSetupMissing) {
		t.Fatalf("the forged setup's hash after the refusal: %s, want %s", first.Type, wire.TypeExecSetupMissing)
	}

	if first, res := place(t, ctx, coord, byHash(execIn(cwd, "t3", 0), true)); res == nil || res.Result.Status != event.Succeeded {
		t.Fatalf("with its setup: %s, %+v", first.Type, res)
	}
	for i := range 3 {
		id := fmt.Sprintf("t%d", 4+i)
		first, res := place(t, ctx, coord, byHash(execIn(cwd, id, 0), false))
		if res == nil || res.Result.Status != event.Succeeded {
			t.Fatalf("%s by hash once the setup is held: %s, %+v", id, first.Type, res)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.threads) != 0 || len(w.slots) != 0 {
		t.Errorf("after every thread ended: %d hosted, %d slots taken", len(w.threads), len(w.slots))
	}
}

// TestSetupsBounded: past maxSetups, the oldest setup goes.
func TestSetupsBounded(t *testing.T) {
	var s setups
	var first string
	for i := range maxSetups + 1 {
		req := execIn("/tmp", "t", 0)
		req.Thread.Agent.Instructions = fmt.Sprint("setup ", i)
		req = byHash(req, true)
		if i == 0 {
			first = req.SetupHash
		}
		if err := s.complete(&req); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.byKey) != maxSetups {
		t.Errorf("%d setups held, want %d", len(s.byKey), maxSetups)
	}
	req := byHash(execIn("/tmp", "t", 0), false)
	req.SetupHash = first
	if err := s.complete(&req); !errors.Is(err, errSetupMissing) {
		t.Errorf("the oldest setup after %d more: %v, want errSetupMissing", maxSetups, err)
	}
}

// TestSetupRoundTrip: a thread sent without its setup, beside one that
// came before, is the thread the coordinator placed, its own name
// included.
func TestSetupRoundTrip(t *testing.T) {
	var s setups
	a, b := execIn("/tmp", "a", time.Second), execIn("/tmp", "b", time.Second)
	b.Thread.Agent.Name, b.Thread.Name = "sibling", "sibling"
	withSetup, byName := byHash(a, true), byHash(b, false)
	if withSetup.SetupHash != byName.SetupHash {
		t.Fatal("siblings that differ only in their names have different setup hashes")
	}
	for _, c := range []struct {
		req  wire.ExecRequest
		want wire.ExecRequest
	}{{withSetup, a}, {byName, b}} {
		if err := s.complete(&c.req); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.want.Thread, c.req.Thread); diff != "" {
			t.Errorf("thread %s (-want +got):\n%s", c.want.Thread.ID, diff)
		}
	}
}

// BenchmarkHandOffByHash is BenchmarkHandOff for placements that name
// their setup by hash, as a coordinator sends every placement after the
// first of a setup on a worker.
func BenchmarkHandOffByHash(b *testing.B) {
	_, coord := startWorker(b)
	ctx := context.Background()
	cwd := b.TempDir()
	first := byHash(execIn(cwd, "t", 0), true)
	msgs := make([]wire.Msg, b.N+1)
	msgs[0] = wire.Message(wire.TypeExecRequest, first)
	for i := range b.N {
		msgs[i+1] = wire.Message(wire.TypeExecRequest, byHash(execIn(cwd, fmt.Sprintf("t%d", i), 0), false))
	}
	b.ReportAllocs()
	for i, m := range msgs {
		if i == 1 {
			b.ResetTimer()
		}
		call, err := transport.Request(ctx, coord, wire.SubjectExec("w1"), m)
		if err != nil {
			b.Fatal(err)
		}
		for {
			m, err := call.Next(ctx, 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if m.Type == string(wire.TypeExecSetupMissing) {
				b.Fatal("setup missing")
			}
			if m.Type == string(wire.TypeExecResult) {
				break
			}
		}
		call.Close()
	}
}
