// Package mcp_test runs Formica against real MCP servers from npm
// (server-everything over stdio and streamable HTTP, server-filesystem),
// driven by an OpenAI-compatible model server the test starts, through a
// coordinator and workers on a real embedded NATS.
package mcp_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/google/uuid"

	"github.com/formica-run/formica/internal/coordinator"
	"github.com/formica-run/formica/internal/embedded"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/mcp"
	"github.com/formica-run/formica/internal/mcp/mcptest"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/oneshot"
	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/tools"
	"github.com/formica-run/formica/internal/wire"
)

const runTimeout = 90 * time.Second

// pool makes a pool of servers from an mcpServers config, as --mcp-config does.
func pool(t *testing.T, servers map[string]any) *mcp.Pool {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, mcptest.Config(servers), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := mcp.Open(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// cluster starts a coordinator with one worker having the pool's servers
// (nil: none), and a client.
func cluster(t *testing.T, p *mcp.Pool) (*embedded.Stack, *oneshot.Client) {
	t.Helper()
	s, err := embedded.Start(context.Background(), embedded.Config{Workers: 1, Slots: 8,
		Models: runner.ModelOpenerFunc(providers.Open), HeartbeatInterval: 200 * time.Millisecond, MCP: p,
		Coordinator: coordinator.Config{Cwd: os.TempDir()}}) // the runs' t.TempDir()s
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	return s, newClient(t, s)
}

func newClient(t *testing.T, s *embedded.Stack) *oneshot.Client {
	nc, err := s.Connect("test-client")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := oneshot.New(nc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// agent is a root agent on the test model with the agent tool, the named
// MCP servers and helpers that inherit everything.
func agent(servers []string, perms policy.Permission) spec.Agent {
	return spec.Agent{Name: "root", Model: "openai:test", Tools: []string{"agent"},
		Harness: spec.Harness{MCP: servers, Permissions: perms},
		Helper:  spec.Helper{Tools: spec.ToolPolicy{Policy: policy.Inherit}}}
}

func run(t *testing.T, cl *oneshot.Client, a spec.Agent, approver policy.Approver) record.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	sub := wire.RunSubmit{RunID: uuid.NewString(), Task: "root", Agent: a, Cwd: t.TempDir()}
	rec, err := cl.Run(ctx, sub, nil, approver)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return rec
}

func everything(t *testing.T) (mcptest.Servers, string) {
	srv := mcptest.Find(t)
	mark := uuid.NewString()
	return srv, mark
}

// TestHelperAtDepth2CallsMCPTool: a helper two levels down calls tools of
// a stdio and a streamable HTTP server and their results reach the root; the tool list it sends the model
// holds each MCP tool once, with the server's schema.
func TestHelperAtDepth2CallsMCPTool(t *testing.T) {
	srv, mark := everything(t)
	ms := startModel(t, tree(func(r *chatRequest) answer {
		if r.turn() == 0 {
			return answer{calls: []call{{"mcp__everything__echo", map[string]string{"message": "from depth 2"}},
				{"mcp__remote__get-sum", map[string]int{"a": 40, "b": 2}}}}
		}
		return answer{text: r.allTools()}
	}))
	_, cl := cluster(t, pool(t, map[string]any{"everything": srv.EverythingStdio(mark),
		"remote": map[string]any{"url": srv.EverythingHTTP(t)}}))
	rec := run(t, cl, agent([]string{"everything", "remote"}, policy.Permission{}), nil)
	if rec.Status != event.Succeeded || !strings.Contains(rec.Output, "Echo: from depth 2") || !strings.Contains(rec.Output, "42") {
		t.Fatalf("run %s: output %q, error %q", rec.Status, rec.Output, rec.Error)
	}
	leaf := ms.requests("leaf")
	if len(leaf) == 0 {
		t.Fatal("no model request from the leaf")
	}
	names := leaf[0].toolNames()
	seen := map[string]int{}
	for _, n := range names {
		seen[n]++
	}
	for n, c := range seen {
		if c != 1 {
			t.Errorf("tool %s offered %d times", n, c)
		}
	}
	for _, want := range []string{"mcp__everything__echo", "mcp__everything__get-sum", "mcp__remote__echo", "mcp__remote__get-sum", "agent", "read_file"} {
		if seen[want] != 1 {
			t.Errorf("leaf's tools %v lack %s", names, want)
		}
	}
	for _, tl := range leaf[0].Tools {
		if tl.Function.Name == "mcp__everything__echo" && !strings.Contains(string(tl.Function.Parameters), `"message"`) {
			t.Errorf("echo's schema %s is not the server's", tl.Function.Parameters)
		}
	}
}

// TestDenyRuleOnMCPTools: a deny rule on mcp__everything__* gives the
// usual deny text, and the server is never asked.
func TestDenyRuleOnMCPTools(t *testing.T) {
	srv, mark := everything(t)
	startModel(t, tree(func(r *chatRequest) answer {
		if r.turn() == 0 {
			return answer{calls: []call{{"mcp__everything__echo", map[string]string{"message": "x"}}}}
		}
		return answer{text: r.lastTool()}
	}))
	_, cl := cluster(t, pool(t, map[string]any{"everything": srv.EverythingStdio(mark)}))
	perms := policy.Permission{Rules: []policy.Rule{{Tool: "mcp__everything__*", Decision: policy.Deny}}}
	rec := run(t, cl, agent([]string{"everything"}, perms), nil)
	if want := tools.DeniedText("mcp__everything__echo"); rec.Output != want {
		t.Fatalf("output %q (error %q), want %q", rec.Output, rec.Error, want)
	}
}

// TestAskOnMCPToolFromDepth2: an ask rule matching the arguments' JSON
// reaches the run's approver from depth 2, naming the tool, the thread
// path and the exact arguments; approved, the call runs.
func TestAskOnMCPToolFromDepth2(t *testing.T) {
	srv, mark := everything(t)
	startModel(t, tree(func(r *chatRequest) answer {
		if r.turn() == 0 {
			return answer{calls: []call{{"mcp__everything__echo", map[string]string{"message": "deploy now"}}}}
		}
		return answer{text: r.lastTool()}
	}))
	_, cl := cluster(t, pool(t, map[string]any{"everything": srv.EverythingStdio(mark)}))
	perms := policy.Permission{Rules: []policy.Rule{{Tool: "mcp__everything__echo", Match: `*"deploy*`, Decision: policy.Ask}}}
	var mu sync.Mutex
	var asked []policy.ApprovalRequest
	approver := policy.ApproverFunc(func(_ context.Context, req policy.ApprovalRequest) (policy.Approval, error) {
		mu.Lock()
		asked = append(asked, req)
		mu.Unlock()
		return policy.Approval{Allow: true}, nil
	})
	rec := run(t, cl, agent([]string{"everything"}, perms), approver)
	if !strings.Contains(rec.Output, "Echo: deploy now") {
		t.Fatalf("output %q (error %q)", rec.Output, rec.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0].Tool != "mcp__everything__echo" || asked[0].ThreadPath != "root/mid/leaf" ||
		!strings.Contains(asked[0].Arguments, "deploy now") {
		t.Fatalf("approval requests %+v, want one for the leaf's echo", asked)
	}
}

// TestUnknownServerFailsClearly: a spec naming a server no worker has fails
// the run, saying which server and what the worker has.
func TestUnknownServerFailsClearly(t *testing.T) {
	srv, mark := everything(t)
	startModel(t, func(*chatRequest) answer { return answer{text: "never"} })
	_, cl := cluster(t, pool(t, map[string]any{"everything": srv.EverythingStdio(mark)}))
	rec := run(t, cl, agent([]string{"github"}, policy.Permission{}), nil)
	if rec.Status != event.Failed || !strings.Contains(rec.Error, `"github" is not configured on this worker (its MCP servers: everything)`) {
		t.Fatalf("run %s, error %q", rec.Status, rec.Error)
	}
}

// TestPlacedOnTheWorkerWithTheServer: of two workers, threads naming a
// server run on the one that has it, and `workers` shows who has what.
func TestPlacedOnTheWorkerWithTheServer(t *testing.T) {
	srv, mark := everything(t)
	startModel(t, tree(func(r *chatRequest) answer {
		if r.turn() == 0 {
			return answer{calls: []call{{"mcp__everything__get-sum", map[string]int{"a": 40, "b": 2}}}}
		}
		return answer{text: r.lastTool()}
	}))
	s, cl := cluster(t, nil) // the first worker has no MCP servers
	with, err := embedded.Start(context.Background(), embedded.Config{NoCoordinator: true, Workers: 1, Slots: 8,
		Connect: func(name string) (*nats.Conn, error) { return s.Connect(name) },
		Models:  runner.ModelOpenerFunc(providers.Open), HeartbeatInterval: 200 * time.Millisecond,
		MCP: pool(t, map[string]any{"everything": srv.EverythingStdio(mark)})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { with.Stop() })
	want := with.Workers[0].ID()
	waitFor(t, "the second worker to register", func() bool { return len(s.Coordinator.Workers()) == 2 })
	for _, w := range s.Coordinator.Workers() {
		if has := slices.Contains(w.MCP, "everything"); has != (w.ID == want) {
			t.Errorf("worker %s announces MCP servers %v", w.ID, w.MCP)
		}
	}
	for i := range 3 {
		rec := run(t, cl, agent([]string{"everything"}, policy.Permission{}), nil)
		if rec.Status != event.Succeeded || !strings.Contains(rec.Output, "42") {
			t.Fatalf("run %d: %s, output %q, error %q", i, rec.Status, rec.Output, rec.Error)
		}
		for _, th := range rec.Threads {
			if th.Worker != want {
				t.Errorf("run %d: thread %s ran on %s, not on %s which has the server", i, th.Name, th.Worker, want)
			}
		}
	}
}

// TestKilledServerRestarts: the stdio server killed during a call gives a
// clear tool error; the next call starts it again and works.
func TestKilledServerRestarts(t *testing.T) {
	srv, mark := everything(t)
	const long = "mcp__everything__trigger-long-running-operation"
	// The killing stops, under mu, when the model is asked its next turn:
	// the long call's result is in by then, and the restarted server of the
	// next call is never killed. (Events may reach the test a heartbeat
	// late, so they cannot mark the end.)
	var mu sync.Mutex
	ended := false
	ms := startModel(t, func(r *chatRequest) answer {
		switch r.turn() {
		case 0:
			return answer{calls: []call{{"mcp__everything__echo", map[string]string{"message": "up"}}}}
		case 1:
			return answer{calls: []call{{long, map[string]int{"duration": 60, "steps": 1}}}}
		case 2:
			mu.Lock()
			ended = true
			mu.Unlock()
			return answer{calls: []call{{"mcp__everything__echo", map[string]string{"message": "after restart"}}}}
		}
		return answer{text: r.lastTool()}
	})
	_, cl := cluster(t, pool(t, map[string]any{"everything": srv.EverythingStdio(mark)}))
	a := agent([]string{"everything"}, policy.Permission{})
	a.Tools = nil
	// Once the long call is under way, kill its server until the call ends.
	called := make(chan struct{})
	var once sync.Once
	events := event.SinkFunc(func(e event.Event) {
		if e.Type == event.ToolCall && e.Tool == long {
			once.Do(func() { close(called) })
		}
	})
	killed, done := make(chan int, 1), make(chan struct{})
	go func() {
		n := 0
		defer func() { killed <- n }()
		select {
		case <-called:
		case <-done:
			return
		}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			mu.Lock()
			if ended {
				mu.Unlock()
				return
			}
			for _, pid := range markedPids(mark) {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					n++
				}
			}
			mu.Unlock()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	rec, err := cl.Run(ctx, wire.RunSubmit{RunID: uuid.NewString(), Task: "root", Agent: a, Cwd: t.TempDir()}, events, nil)
	close(done)
	if err != nil {
		t.Fatal(err)
	}
	if n := <-killed; n == 0 {
		t.Fatal("no server process was killed")
	}
	if rec.Status != event.Succeeded || !strings.Contains(rec.Output, "Echo: after restart") {
		t.Fatalf("run %s: output %q, error %q", rec.Status, rec.Output, rec.Error)
	}
	reqs := ms.requests("root")
	if len(reqs) < 3 {
		t.Fatalf("%d model requests", len(reqs))
	}
	if got := reqs[2].lastTool(); !strings.Contains(got, `MCP server failed: "everything" stopped during the call`) ||
		!strings.Contains(got, "started again on the next call") {
		t.Fatalf("result of the call its server died in: %q", got)
	}
}

// markedPids returns the processes whose environment holds mark.
func markedPids(mark string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && strings.Contains(string(env), "FORMICA_TEST_MARK="+mark+"\x00") {
			out = append(out, pid)
		}
	}
	return out
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
