package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/formica-run/formica/internal/mcp"
	"github.com/formica-run/formica/internal/mcp/mcptest"
	"github.com/formica-run/formica/internal/sandbox"
	"github.com/formica-run/formica/internal/tools"
)

func newPool(t *testing.T, servers map[string]any, sb *sandbox.Sandbox) *mcp.Pool {
	t.Helper()
	ss, err := mcp.Parse(mcptest.Config(servers))
	if err != nil {
		t.Fatal(err)
	}
	p, err := mcp.New(mcp.Config{Servers: ss, Sandbox: sb})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func find(t *testing.T, ts []tools.Tool, name string) tools.Tool {
	t.Helper()
	for _, x := range ts {
		if x.Name() == name {
			return x
		}
	}
	t.Fatalf("no tool %s in %v", name, tools.Names(ts))
	return nil
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
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

func openSandbox(t *testing.T) *sandbox.Sandbox {
	sb, err := sandbox.New(sandbox.Options{})
	if err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// TestStdioEverything lists and calls server-everything's tools over stdio,
// sandboxed and not; the server sees none of the worker's environment.
func TestStdioEverything(t *testing.T) {
	srv := mcptest.Find(t)
	t.Setenv("OPENAI_API_KEY", "sk-worker-secret")
	for _, mode := range []string{"plain", "sandboxed"} {
		t.Run(mode, func(t *testing.T) {
			var sb *sandbox.Sandbox
			if mode == "sandboxed" {
				sb = openSandbox(t)
			}
			p := newPool(t, map[string]any{"everything": srv.EverythingStdio("x")}, sb)
			release := p.Hold("run1")
			defer release()
			ts, err := p.Tools(ctxT(t), "run1", "th1", t.TempDir(), []string{"everything"})
			if err != nil {
				t.Fatal(err)
			}
			echo := find(t, ts, "mcp__everything__echo")
			if !strings.Contains(string(echo.Schema()), `"message"`) || echo.Description() == "" {
				t.Errorf("echo schema %s, description %q", echo.Schema(), echo.Description())
			}
			out, err := echo.Run(ctxT(t), json.RawMessage(`{"message":"hi there"}`))
			if err != nil || !strings.Contains(out, "hi there") {
				t.Fatalf("echo = %q, %v", out, err)
			}
			env, err := find(t, ts, "mcp__everything__get-env").Run(ctxT(t), json.RawMessage(`{}`))
			if err != nil || !strings.Contains(env, "FORMICA_TEST_MARK") || strings.Contains(env, "sk-worker-secret") {
				t.Fatalf("get-env = %q, %v; want the config's env and none of the worker's", env, err)
			}
			img, err := find(t, ts, "mcp__everything__get-tiny-image").Run(ctxT(t), json.RawMessage(`{}`))
			if err != nil || !strings.Contains(img, "[image: image/png,") {
				t.Errorf("get-tiny-image = %q, %v; want the image summarised", img, err)
			}
		})
	}
}

// TestServerStopsWithTheRun: the run's last release stops its stdio server.
func TestServerStopsWithTheRun(t *testing.T) {
	srv := mcptest.Find(t)
	mark := uuid.NewString()
	p := newPool(t, map[string]any{"everything": srv.EverythingStdio(mark)}, nil)
	r1, r2 := p.Hold("run1"), p.Hold("run1")
	ts, err := p.Tools(ctxT(t), "run1", "", t.TempDir(), []string{"everything"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := find(t, ts, "mcp__everything__echo").Run(ctxT(t), json.RawMessage(`{"message":"a"}`)); err != nil {
		t.Fatal(err)
	}
	if n := len(markedPids(mark)); n != 1 {
		t.Fatalf("%d server processes, want 1", n)
	}
	r1()
	if n := len(markedPids(mark)); n != 1 {
		t.Fatalf("server stopped while a thread of the run still holds it (%d processes)", n)
	}
	r2()
	waitFor(t, "the server process to end", func() bool { return len(markedPids(mark)) == 0 })
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

// TestCrashRestartsOnce: a server killed during a call fails that call
// with a clear error; the next call starts it again; a second crash is final.
func TestCrashRestartsOnce(t *testing.T) {
	srv := mcptest.Find(t)
	mark := uuid.NewString()
	p := newPool(t, map[string]any{"everything": srv.EverythingStdio(mark)}, nil)
	defer p.Hold("run1")()
	ts, err := p.Tools(ctxT(t), "run1", "", t.TempDir(), []string{"everything"})
	if err != nil {
		t.Fatal(err)
	}
	long := find(t, ts, "mcp__everything__trigger-long-running-operation")
	echo := find(t, ts, "mcp__everything__echo")
	kill := func() {
		errc := make(chan error, 1)
		go func() {
			_, err := long.Run(ctxT(t), json.RawMessage(`{"duration": 60, "steps": 1}`))
			errc <- err
		}()
		var pids []int
		waitFor(t, "the server process", func() bool { pids = markedPids(mark); return len(pids) == 1 })
		time.Sleep(200 * time.Millisecond) // let the call reach the server
		if err := syscallKill(pids[0]); err != nil {
			t.Fatal(err)
		}
		select {
		case err = <-errc:
		case <-time.After(30 * time.Second):
			t.Fatal("the call did not end when its server was killed")
		}
		if err == nil || !errors.Is(err, mcp.ErrServer) {
			t.Fatalf("call on a killed server = %v, want ErrServer", err)
		}
		t.Logf("error: %v", err)
		errc <- err
	}
	kill()
	if out, err := echo.Run(ctxT(t), json.RawMessage(`{"message":"back"}`)); err != nil || !strings.Contains(out, "back") {
		t.Fatalf("after a restart: %q, %v", out, err)
	}
	kill()
	_, err = echo.Run(ctxT(t), json.RawMessage(`{"message":"again"}`))
	if err == nil || !strings.Contains(err.Error(), "not started again") {
		t.Fatalf("after a second crash: %v, want a final error", err)
	}
}

// goServer is an in-process streamable HTTP MCP server built with the SDK:
// it records request metadata, can hang, and can change its tool list.
type goServer struct {
	srv   *sdk.Server
	mu    sync.Mutex
	metas []sdk.Meta
}

func newGoServer(t *testing.T) (*goServer, string) {
	g := &goServer{srv: sdk.NewServer(&sdk.Implementation{Name: "test", Version: "1"}, nil)}
	type args struct {
		Text string `json:"text"`
	}
	sdk.AddTool(g.srv, &sdk.Tool{Name: "say", Description: "Says text."}, func(ctx context.Context, req *sdk.CallToolRequest, a args) (*sdk.CallToolResult, any, error) {
		g.mu.Lock()
		g.metas = append(g.metas, req.Params.Meta)
		g.mu.Unlock()
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "said " + a.Text}}}, nil, nil
	})
	sdk.AddTool(g.srv, &sdk.Tool{Name: "hang", Description: "Never answers."}, func(ctx context.Context, req *sdk.CallToolRequest, a struct{}) (*sdk.CallToolResult, any, error) {
		<-ctx.Done()
		return nil, nil, ctx.Err()
	})
	sdk.AddTool(g.srv, &sdk.Tool{Name: "fail", Description: "Fails."}, func(ctx context.Context, req *sdk.CallToolRequest, a struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no such issue"}}}, nil, nil
	})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return g.srv }, nil)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return g, hs.URL
}
