package coordinator

import (
	"context"
	"testing"
	"time"
)

// TestPlaceByMCPServers: a thread naming MCP servers goes to a worker that
// has them all, waits for one when they are full (letting other threads
// pass), and goes anywhere when no worker has them (its worker then fails
// it, naming the missing server).
func TestPlaceByMCPServers(t *testing.T) {
	g := newRegistry(time.Now)
	plain, withGH := hb("plain", 4), hb("gh", 1)
	withGH.MCP = []string{"github", "docs"}
	g.heartbeat(plain)
	g.heartbeat(withGH)
	ctx := context.Background()

	id, err := g.placeFor(ctx, time.Second, []string{"github"})
	if err != nil || id != "gh" {
		t.Fatalf("thread naming github placed on %q (%v), want gh", id, err)
	}
	// gh is full: the next github thread waits, a plain one passes it.
	got := make(chan string, 1)
	go func() {
		id, _ := g.placeFor(ctx, 10*time.Second, []string{"github", "docs"})
		got <- id
	}()
	waitWaiters(t, g, 1)
	if id, err := g.place(ctx, time.Second); err != nil || id != "plain" {
		t.Fatalf("plain thread behind a waiting github thread: %q, %v", id, err)
	}
	select {
	case id := <-got:
		t.Fatalf("github thread placed on %q while gh was full", id)
	default:
	}
	g.release("gh")
	if id := <-got; id != "gh" {
		t.Fatalf("waiting github thread placed on %q, want gh", id)
	}
	// No worker has jira: any worker will do, and that worker says why it fails.
	if id, err := g.placeFor(ctx, time.Second, []string{"jira"}); err != nil || id != "plain" {
		t.Fatalf("thread naming an unknown server: %q, %v", id, err)
	}
	if l := g.list(); len(l[0].MCP) != 2 {
		t.Errorf("worker list %+v does not show gh's servers", l)
	}
}

func waitWaiters(t *testing.T, g *registry, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		g.mu.Lock()
		l := g.waiters.Len()
		g.mu.Unlock()
		if l == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters, want %d", l, n)
		}
		time.Sleep(time.Millisecond)
	}
}
