package mcptest

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// EverythingHTTP starts server-everything over streamable HTTP on a free
// loopback port and returns its endpoint; it is killed at cleanup.
func (s Servers) EverythingHTTP(t testing.TB) string {
	t.Helper()
	port := FreePort(t)
	cmd := exec.Command(s.Node, s.Everything, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	ready := &waitLine{want: "listening", ch: make(chan struct{})}
	cmd.Stderr = ready
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	select {
	case <-ready.ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("server-everything did not start listening: %s", ready.text())
	}
	return "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"
}

// waitLine closes ch once want has been written.
type waitLine struct {
	mu   sync.Mutex
	want string
	buf  []byte
	ch   chan struct{}
	done bool
}

func (l *waitLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) < 1<<16 {
		l.buf = append(l.buf, p...)
	}
	if !l.done && strings.Contains(string(l.buf), l.want) {
		l.done = true
		close(l.ch)
	}
	return len(p), nil
}

func (l *waitLine) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}
