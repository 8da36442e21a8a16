package worker

import (
	"context"
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

// TestSpawnAskedAgainAfterReconnect: a spawn whose request, or whose
// answer, was lost with the connection it left on (its server died) is
// asked again once the worker's connection has moved and nothing was heard
// since, instead of waiting out the coordinator's patience; the
// coordinator sees the same call twice.
func TestSpawnAskedAgainAfterReconnect(t *testing.T) {
	for _, answerLost := range []bool{false, true} {
		name := "request lost"
		if answerLost {
			name = "answer lost"
		}
		t.Run(name, func(t *testing.T) { spawnAskedAgain(t, answerLost) })
	}
}

func spawnAskedAgain(t *testing.T, answerLost bool) {
	ctx := context.Background()
	wnc, cnc, coord := reaskStack(t)
	var mu sync.Mutex
	var calls []string
	asked := make(chan struct{}, 4)
	spawnSub, err := cnc.Subscribe(wire.SubjectSpawn("c1", "w1"), func(m *nats.Msg) {
		var req wire.SpawnRequest
		if err := wire.DecodeAs(m.Data, wire.TypeSpawnRequest, &req); err != nil {
			t.Errorf("spawn request: %v", err)
			return
		}
		mu.Lock()
		calls = append(calls, req.CallID)
		first := len(calls) == 1
		mu.Unlock()
		if first {
			if answerLost { // heard: the helper's keep-alive, then its end goes with the dying server
				m.Respond(wire.MustEncode(wire.TypeProgress, wire.Progress{ThreadID: "helper-a"}))
			}
			asked <- struct{}{}
			return
		}
		asked <- struct{}{}
		res := wire.SpawnResult{ThreadID: "helper-a", Result: thread.Result{Status: event.Succeeded, Output: "asked twice"}}
		if err := m.Respond(wire.MustEncode(wire.TypeSpawnResult, res)); err != nil {
			t.Errorf("answer: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer spawnSub.Unsubscribe()
	if err := cnc.Flush(); err != nil {
		t.Fatal(err)
	}
	a := spec.Agent{Name: "lead", Model: providers.Sim, Tools: []string{tools.AgentToolName}}
	th := thread.Thread{RunID: "r1", ID: "t1", Path: "root", Name: "lead", Task: "Plan:\n- a", Agent: a, Cwd: t.TempDir()}
	req := wire.ExecRequest{Thread: th, Coordinator: "c1", Epoch: "e1", Attempt: 1, Token: "tok", Uptime: time.Minute}
	call, err := transport.Request(ctx, coord, wire.SubjectExec("w1"), wire.Message(wire.TypeExecRequest, req))
	if err != nil {
		t.Fatal(err)
	}
	defer call.Close()
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		t.Fatal("the parent did not ask for its helper")
	}
	if err := wnc.ForceReconnect(); err != nil { // its server died; it is on another now
		t.Fatal(err)
	}
	er := awaitResult(t, ctx, call, 20*time.Second) // well within the spawn's patience
	if er.Result.Status != event.Succeeded || !strings.Contains(er.Result.Output, "asked twice") {
		t.Errorf("parent ended %s with %q (%s), want the helper's answer", er.Result.Status, er.Result.Output, er.Result.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 || calls[0] != calls[1] || calls[0] == "" {
		t.Errorf("spawn requests for calls %q, want the same call twice", calls)
	}
}
