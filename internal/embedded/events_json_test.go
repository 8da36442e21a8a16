package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/limits"
)

// TestEventsOnNATSAreJSON reads a run's events as any tool would: a plain
// NATS subscription on formica.events.> and encoding/json, nothing of
// Formica's own code.
func TestEventsOnNATSAreJSON(t *testing.T) {
	s, cl := startStack(t, 2, 4)
	nc, err := s.Connect("json-reader")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var mu sync.Mutex
	var msgs []*nats.Msg
	sub, err := nc.Subscribe("formica.events.>", func(m *nats.Msg) {
		mu.Lock()
		msgs = append(msgs, m)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	sub.SetPendingLimits(-1, -1)
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	sb := simSubmit(t, "Plan:\n- a\n- b", 20, limits.Config{})
	runAsync(t, context.Background(), cl, sb, nil)()
	if err := sub.Drain(); err != nil {
		t.Fatal(err)
	}
	nc.FlushTimeout(runTimeout)

	mu.Lock()
	defer mu.Unlock()
	seen := map[string]int{}
	for _, m := range msgs {
		if !strings.HasPrefix(m.Subject, "formica.events."+sb.RunID+".") {
			continue
		}
		var e map[string]any
		dec := json.NewDecoder(bytes.NewReader(m.Data))
		dec.UseNumber()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("%s: not JSON: %v: %q", m.Subject, err, m.Data)
		}
		typ, _ := e["type"].(string)
		if m.Subject != "formica.events."+sb.RunID+"."+typ {
			t.Errorf("subject %s carries type %q", m.Subject, typ)
		}
		if e["run_id"] != sb.RunID {
			t.Errorf("%s: run_id %v", typ, e["run_id"])
		}
		if ct := m.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", typ, ct)
		}
		if typ == "model.call" {
			ms, ok := e["latency_ms"].(json.Number)
			n, err := ms.Int64()
			if !ok || err != nil || n < 20 || n > 60_000 {
				t.Errorf("model.call latency_ms %v: want whole milliseconds, at least the sim's 20", e["latency_ms"])
			}
		}
		seen[typ]++
	}
	for _, typ := range []string{"thread.spawned", "thread.started", "thread.finished", "model.call", "tool.call", "tool.result"} {
		if seen[typ] == 0 {
			t.Errorf("no %s event read as JSON (saw %v)", typ, seen)
		}
	}
}
