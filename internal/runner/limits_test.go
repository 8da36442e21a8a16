package runner

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model"
)

func TestRefusalIsToolResultAndParentGoesOn(t *testing.T) {
	m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		switch task(req) {
		case "root-task":
			if !hasToolResults(req) {
				return calls(spawnCall("c1", "a", "a-task")), nil
			}
			return text("root:" + joinResults(req)), nil
		case "a-task":
			if !hasToolResults(req) {
				return calls(spawnCall("c1", "b", "b-task")), nil
			}
			return text("a saw:" + joinResults(req)), nil
		}
		return text("unexpected"), nil
	}}
	ev := &collector{}
	r := newRunner(t, setup{models: models{"fake:root": m}, events: ev})
	res := run(t, r, RunRequest{Task: "root-task", Agent: generalAgent(), Limits: limits.Config{MaxDepth: 1}})
	want := "root:a saw:" + limits.DepthMessage
	if res.Status != event.Succeeded || res.Output != want {
		t.Fatalf("got %s %q (%s), want %q", res.Status, res.Output, res.Error, want)
	}
	refused := ev.of(event.ThreadRefused)
	if len(refused) != 1 || refused[0].Reason != "depth" || refused[0].Depth != 2 || refused[0].Name != "b" {
		t.Fatalf("refusal events = %+v", refused)
	}
	if res.Stats.RefusedDepth != 1 || res.Stats.Live != 0 {
		t.Fatalf("stats = %+v", res.Stats)
	}
}

func TestDepthFourAdmittedFiveRefused(t *testing.T) {
	// Each level spawns the next; the level-5 spawn is refused.
	m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		var n int
		fmt.Sscanf(task(req), "level-%d", &n)
		if !hasToolResults(req) {
			return calls(spawnCall("c", fmt.Sprintf("l%d", n+1), fmt.Sprintf("level-%d", n+1))), nil
		}
		return text(fmt.Sprintf("%d>%s", n, joinResults(req))), nil
	}}
	ev := &collector{}
	r := newRunner(t, setup{models: models{"fake:root": m}, events: ev})
	res := run(t, r, RunRequest{Task: "level-0", Agent: generalAgent()})
	want := "0>1>2>3>4>" + limits.DepthMessage
	if res.Output != want {
		t.Fatalf("output %q, want %q", res.Output, want)
	}
	maxDepth := 0
	for _, e := range ev.of(event.ThreadStarted) {
		maxDepth = max(maxDepth, e.Depth)
	}
	if maxDepth != 4 {
		t.Fatalf("deepest thread %d, want 4", maxDepth)
	}
}

func TestThreadLimitRefusesSeventeenthThenAdmitsAfterRelease(t *testing.T) {
	release := make(chan struct{})
	m := &fakeModel{fn: func(ctx context.Context, req model.Request) (model.Response, error) {
		tk := task(req)
		switch {
		case tk == "root-task" && !hasToolResults(req):
			var cs []model.ToolCall
			for i := range 20 {
				cs = append(cs, spawnCall(fmt.Sprint("c", i), fmt.Sprint("leaf", i), fmt.Sprint("leaf-", i)))
			}
			return calls(cs...), nil
		case tk == "root-task" && len(req.Messages) == 1+1+1+20: // after the fan-out
			return calls(spawnCall("again", "extra", "extra-task")), nil
		case tk == "root-task":
			return text("done"), nil
		case strings.HasPrefix(tk, "leaf-"):
			select {
			case <-release:
			case <-ctx.Done():
				return model.Response{}, ctx.Err()
			}
			return text("ok"), nil
		}
		return text("extra ok"), nil
	}}
	var refusals atomic.Int32
	ev := &collector{}
	ev.hook = func(e event.Event) {
		if e.Type == event.ThreadRefused && refusals.Add(1) == 4 {
			close(release) // the 16 admitted helpers may now finish
		}
	}
	r := newRunner(t, setup{models: models{"fake:root": m}, events: ev})
	res := run(t, r, RunRequest{Task: "root-task", Agent: generalAgent()})
	if res.Status != event.Succeeded {
		t.Fatalf("run %s: %s", res.Status, res.Error)
	}
	reqs := m.requests()
	var fanIn model.Request
	for _, q := range reqs {
		if task(q) == "root-task" && len(toolResults(q)) == 20 {
			fanIn = q
		}
	}
	ok, refused := 0, 0
	for _, msg := range toolResults(fanIn) {
		switch msg.Content {
		case "ok":
			ok++
		case limits.ThreadMessage:
			refused++
		default:
			t.Errorf("unexpected result %q", msg.Content)
		}
	}
	if ok != 16 || refused != 4 {
		t.Fatalf("ok %d refused %d, want 16 and 4", ok, refused)
	}
	var extra string
	for _, q := range reqs {
		if task(q) == "root-task" && len(toolResults(q)) == 1 {
			extra = toolResults(q)[0].Content
		}
	}
	if extra != "extra ok" {
		t.Fatalf("spawn after release got %q", extra)
	}
	if res.Stats.Peak != 16 || res.Stats.Live != 0 {
		t.Fatalf("stats %+v", res.Stats)
	}
}

func TestSpawnStormNeverExceedsLimit(t *testing.T) {
	const attempts = 1000
	m := &fakeModel{fn: func(_ context.Context, req model.Request) (model.Response, error) {
		if task(req) != "storm" {
			time.Sleep(time.Millisecond)
			return text("leaf"), nil
		}
		if hasToolResults(req) {
			return text("done"), nil
		}
		cs := make([]model.ToolCall, attempts)
		for i := range cs {
			cs[i] = spawnCall(fmt.Sprint("c", i), fmt.Sprint("h", i), "leaf")
		}
		return calls(cs...), nil
	}}
	var mu sync.Mutex
	live, peak := 0, 0
	ev := &collector{hook: func(e event.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e.Type == event.ThreadSpawned:
			live++
			peak = max(peak, live)
		case e.Type == event.ThreadFinished && e.Depth > 0:
			live--
		}
	}}
	// Every call of the storm runs: past the cap on a turn's calls, they
	// would be answered without a spawn (TestToolCallCap).
	r := newRunner(t, setup{models: models{"fake:root": m}, events: ev, maxToolCalls: attempts})
	res := run(t, r, RunRequest{Task: "storm", Agent: generalAgent()})
	if res.Status != event.Succeeded {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	if peak > limits.DefaultMaxThreads || res.Stats.Peak > limits.DefaultMaxThreads {
		t.Fatalf("peak live %d (ledger %d), limit %d", peak, res.Stats.Peak, limits.DefaultMaxThreads)
	}
	if live != 0 || res.Stats.Live != 0 {
		t.Fatalf("live after run: events %d, ledger %d", live, res.Stats.Live)
	}
	if got := res.Stats.Admitted + res.Stats.RefusedThreads; got != attempts {
		t.Fatalf("admitted+refused = %d, want %d", got, attempts)
	}
	if n := len(ev.of(event.ThreadRefused)); n != res.Stats.RefusedThreads {
		t.Fatalf("refusal events %d, ledger %d", n, res.Stats.RefusedThreads)
	}
}
