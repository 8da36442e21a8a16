package worker

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
	"github.com/formica-run/formica/internal/tools"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// A parent waiting on its helpers holds them as data: the calls of one wide
// turn add no goroutine each, and every one of them still gets its answer.
func TestWaitingCallsHoldNoGoroutines(t *testing.T) {
	const helpers = 200
	ctx := context.Background()
	_, cnc, coord := reaskStack(t)
	var mu sync.Mutex
	var asked []*nats.Msg
	all := make(chan struct{})
	sub, err := cnc.Subscribe(wire.SubjectSpawn("c1", "w1"), func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		if asked = append(asked, m); len(asked) == helpers {
			close(all)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := cnc.Flush(); err != nil {
		t.Fatal(err)
	}

	var plan strings.Builder
	plan.WriteString("Plan:\n")
	for i := range helpers {
		fmt.Fprintf(&plan, "- part%d\n", i)
	}
	a := spec.Agent{Name: "lead", Model: providers.Sim, Tools: []string{tools.AgentToolName}}
	th := thread.Thread{RunID: "r1", ID: "t1", Path: "root", Name: "lead", Task: plan.String(), Agent: a, Cwd: t.TempDir()}
	req := wire.ExecRequest{Thread: th, Coordinator: "c1", Epoch: "e1", Attempt: 1, Token: "tok", Uptime: time.Minute}
	before := runtime.NumGoroutine()
	call, err := transport.Request(ctx, coord, wire.SubjectExec("w1"), wire.Message(wire.TypeExecRequest, req))
	if err != nil {
		t.Fatal(err)
	}
	defer call.Close()
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		mu.Lock()
		t.Fatalf("%d of %d spawns asked for", len(asked), helpers)
	}
	// The coordinator answers none yet: every call waits, its coordinator's
	// heartbeats keeping it patient.
	time.Sleep(3 * reaskBeat)
	if added := runtime.NumGoroutine() - before; added >= helpers/4 {
		t.Errorf("%d goroutines more while %d calls wait, want far fewer than one each", added, helpers)
	}

	mu.Lock()
	for _, m := range asked {
		var sr wire.SpawnRequest
		if err := wire.DecodeAs(m.Data, wire.TypeSpawnRequest, &sr); err != nil {
			t.Fatal(err)
		}
		res := wire.SpawnResult{ThreadID: "h-" + sr.CallID, Result: thread.Result{Status: event.Succeeded, Output: "done: " + sr.Name}}
		if err := m.Respond(wire.MustEncode(wire.TypeSpawnResult, res)); err != nil {
			t.Fatal(err)
		}
	}
	mu.Unlock()
	er := awaitResult(t, ctx, call, 20*time.Second)
	if er.Result.Status != event.Succeeded {
		t.Fatalf("parent ended %s (%s)", er.Result.Status, er.Result.Error)
	}
	for _, want := range []string{"done: part0", fmt.Sprintf("done: part%d", helpers-1)} {
		if !strings.Contains(er.Result.Output, want) {
			t.Errorf("parent's answer lacks %q:\n%s", want, er.Result.Output)
		}
	}
}
