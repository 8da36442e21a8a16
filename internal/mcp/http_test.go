package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/formica-run/formica/internal/mcp"
	"github.com/formica-run/formica/internal/mcp/mcptest"
)

// TestHTTPMetaTimeoutAndErrors: over streamable HTTP, calls carry the run
// and thread ids as _meta and the configured headers; a hung tool fails the
// call within the server's timeout; an error result is an error.
func TestHTTPMetaTimeoutAndErrors(t *testing.T) {
	g, url := newGoServer(t)
	p := newPool(t, map[string]any{"go": map[string]any{"url": url, "timeout": "500ms"}}, nil)
	defer p.Hold("run-7")()
	ts, err := p.Tools(ctxT(t), "run-7", "thread-9", t.TempDir(), []string{"go"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := find(t, ts, "mcp__go__say").Run(ctxT(t), json.RawMessage(`{"text":"hello"}`))
	if err != nil || out != "said hello" {
		t.Fatalf("say = %q, %v", out, err)
	}
	g.mu.Lock()
	meta := g.metas[0]
	g.mu.Unlock()
	if meta[mcp.MetaRunID] != "run-7" || meta[mcp.MetaThreadID] != "thread-9" {
		t.Errorf("request _meta = %v, want the run and thread ids", meta)
	}
	_, err = find(t, ts, "mcp__go__hang").Run(ctxT(t), json.RawMessage(`{}`))
	if !errors.Is(err, mcp.ErrServer) || !strings.Contains(err.Error(), "did not answer hang within 500ms") {
		t.Errorf("hang = %v, want a timeout error", err)
	}
	if out, err := find(t, ts, "mcp__go__say").Run(ctxT(t), json.RawMessage(`{"text":"after"}`)); err != nil || out != "said after" {
		t.Errorf("after a timeout: %q, %v", out, err)
	}
	_, err = find(t, ts, "mcp__go__fail").Run(ctxT(t), json.RawMessage(`{}`))
	if err == nil || !strings.Contains(err.Error(), "no such issue") {
		t.Errorf("fail = %v, want the server's error text", err)
	}
	sub, ok := find(t, ts, "mcp__go__say").(interface{ Subject(json.RawMessage) string })
	if !ok || sub.Subject(json.RawMessage(`{ "text" : "x" }`)) != `{"text":"x"}` {
		t.Error("the permission subject is not the arguments' compact JSON")
	}
}

// TestToolListChanged: a server's list_changed notification makes the
// next listing fetch the new list.
func TestToolListChanged(t *testing.T) {
	g, url := newGoServer(t)
	p := newPool(t, map[string]any{"go": map[string]any{"url": url}}, nil)
	defer p.Hold("r")()
	cwd := t.TempDir()
	ts, err := p.Tools(ctxT(t), "r", "", cwd, []string{"go"})
	if err != nil {
		t.Fatal(err)
	}
	v := p.Version()
	sdk.AddTool(g.srv, &sdk.Tool{Name: "added", Description: "New."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "new"}}}, nil, nil
	})
	waitFor(t, "the list_changed notification", func() bool { return p.Version() != v })
	ts2, err := p.Tools(ctxT(t), "r", "", cwd, []string{"go"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts2) != len(ts)+1 {
		t.Fatalf("tools after list_changed: %d, before %d", len(ts2), len(ts))
	}
	find(t, ts2, "mcp__go__added")
}

// TestHTTPEverything: server-everything over streamable HTTP.
func TestHTTPEverything(t *testing.T) {
	url := mcptest.Find(t).EverythingHTTP(t)
	p := newPool(t, map[string]any{"everything": map[string]any{"url": url}}, nil)
	defer p.Hold("r")()
	ts, err := p.Tools(ctxT(t), "r", "", t.TempDir(), []string{"everything"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := find(t, ts, "mcp__everything__get-sum").Run(ctxT(t), json.RawMessage(`{"a": 2, "b": 40}`))
	if err != nil || !strings.Contains(out, "42") {
		t.Fatalf("get-sum = %q, %v", out, err)
	}
}

// TestUnknownServer names what the worker has.
func TestUnknownServer(t *testing.T) {
	_, url := newGoServer(t)
	p := newPool(t, map[string]any{"go": map[string]any{"url": url}}, nil)
	_, err := p.Tools(ctxT(t), "r", "", "", []string{"github"})
	if !errors.Is(err, mcp.ErrUnknownServer) || !strings.Contains(err.Error(), `"github" is not configured on this worker (its MCP servers: go)`) {
		t.Fatalf("err = %v", err)
	}
}

// TestCancelledStartIsNoCrash: threads that give up while a server is
// starting do not use up its restart: the next call starts it and works.
func TestCancelledStartIsNoCrash(t *testing.T) {
	_, url := newGoServer(t)
	var stalling atomic.Bool
	stalling.Store(true)
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stalling.Load() {
			// Every request of the handshake hangs. The SDK's requests
			// outlive the caller's context: they are let go at cleanup.
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		target, _ := neturl.Parse(url)
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) })
	p := newPool(t, map[string]any{"go": map[string]any{"url": hang.URL}}, nil)
	defer p.Hold("r")()
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := p.Tools(ctx, "r", "", t.TempDir(), []string{"go"})
		cancel()
		if err == nil {
			t.Fatal("a start whose caller gave up succeeded")
		}
	}
	stalling.Store(false)
	ts, err := p.Tools(ctxT(t), "r", "", t.TempDir(), []string{"go"})
	if err != nil {
		t.Fatalf("after two abandoned starts: %v", err)
	}
	if out, err := find(t, ts, "mcp__go__say").Run(ctxT(t), json.RawMessage(`{"text":"hi"}`)); err != nil || out != "said hi" {
		t.Fatalf("say = %q, %v", out, err)
	}
}
