package embedded

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/client"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/tools"
	"github.com/formica-run/formica/internal/wire"
)

// benchStack starts a coordinator and two workers, over the in-process
// connection or loopback TCP.
func benchStack(tb testing.TB, tcp bool) *Stack {
	tb.Helper()
	cfg := Config{Workers: 2, Slots: 64, Models: runner.ModelOpenerFunc(providers.Open)}
	cfg.Coordinator.Cwd = tb.TempDir()
	if tcp {
		cfg.Server.Listen = "127.0.0.1:-1"
	}
	s, err := Start(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Stop() })
	if tcp {
		// Every component of the stack has connected in-process; a TCP stack
		// is rebuilt on connections that go through the loopback listener.
		srv := s.Server
		s.Server = nil
		s.Stop()
		cfg.Connect = func(name string) (*nats.Conn, error) { return nats.Connect(srv.ClientURL(), nats.Name(name)) }
		if s, err = Start(context.Background(), cfg); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Stop(); srv.Shutdown() })
	}
	return s
}

func percentile(d []time.Duration, p float64) time.Duration {
	slices.Sort(d)
	return d[int(float64(len(d)-1)*p)]
}

// rawRoundTrips times n plain NATS request-replies between two connections
// of the stack's kind.
func rawRoundTrips(tb testing.TB, s *Stack, n int) []time.Duration {
	resp, err := s.Connect("bench-responder")
	if err != nil {
		tb.Fatal(err)
	}
	req, err := s.Connect("bench-requester")
	if err != nil {
		tb.Fatal(err)
	}
	sub, err := resp.Subscribe("bench.echo", func(m *nats.Msg) { m.Respond(m.Data) })
	if err != nil {
		tb.Fatal(err)
	}
	defer sub.Unsubscribe()
	resp.Flush()
	payload := make([]byte, 128)
	out := make([]time.Duration, n)
	for i := range out {
		t0 := time.Now()
		if _, err := req.Request("bench.echo", payload, 5*time.Second); err != nil {
			tb.Fatal(err)
		}
		out[i] = time.Since(t0)
	}
	return out
}

// spawnRoundTrips runs one root that spawns n helpers one after another and
// returns each spawn's latency as its parent saw it: from the agent tool call
// to its result.
func spawnRoundTrips(tb testing.TB, s *Stack, n int) []time.Duration {
	tb.Helper()
	nc, err := s.Connect("bench-client")
	if err != nil {
		tb.Fatal(err)
	}
	cl, err := client.New(nc, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	var mu sync.Mutex
	starts := map[string]time.Time{}
	var lat []time.Duration
	sink := event.SinkFunc(func(e event.Event) {
		if e.Tool != tools.AgentToolName || e.Depth != 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch e.Type {
		case event.ToolCall:
			starts[e.CallID] = e.Time
		case event.ToolResult:
			lat = append(lat, e.Time.Sub(starts[e.CallID]))
		}
	})
	var task strings.Builder
	for i := range n {
		fmt.Fprintf(&task, "- part %d\n", i)
	}
	sequential := false
	root := spec.Agent{Name: "bench", Model: "sim", Tools: []string{tools.AgentToolName}, ParallelToolCalls: &sequential}
	rec, err := cl.Run(context.Background(), wire.RunSubmit{RunID: uuid.NewString(), Task: task.String(), Agent: root}, sink, nil)
	if err != nil || rec.Status != event.Succeeded {
		tb.Fatalf("bench run: %v %s %s", err, rec.Status, rec.Error)
	}
	if len(rec.Threads) != n+1 {
		tb.Fatalf("%d threads, want %d", len(rec.Threads), n+1)
	}
	workers := map[string]bool{}
	for _, th := range rec.Threads {
		workers[th.Worker] = true
	}
	if len(workers) < 2 {
		tb.Fatalf("parent and helpers ran on %d worker(s) %v, want 2; coordinator sees %+v", len(workers), workers, s.Coordinator.Workers())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lat) < n*9/10 {
		tb.Fatalf("saw %d of %d spawn results", len(lat), n)
	}
	return lat
}

// BenchmarkSpawnPath measures one spawn through the whole path (parent thread
// on one worker, coordinator, helper on the other worker, zero-latency sim
// model) next to a raw NATS request-reply on the same kind of connection, in
// the same run. ratio-p50 is spawn p50 / (2 × raw p50): the aim is ≤ 3.
func BenchmarkSpawnPath(b *testing.B) {
	for _, tcp := range []bool{false, true} {
		name := "inproc"
		if tcp {
			name = "tcp"
		}
		b.Run(name, func(b *testing.B) {
			s := benchStack(b, tcp)
			raw := rawRoundTrips(b, s, 2000)
			// Roots of at most 200 helpers, so no conversation grows with b.N.
			b.ResetTimer()
			var spawns []time.Duration
			for left := max(b.N, 50); left > 0; left -= 200 {
				spawns = append(spawns, spawnRoundTrips(b, s, min(left, 200))...)
			}
			b.StopTimer()
			rawP50, spawnP50 := percentile(raw, 0.5), percentile(spawns, 0.5)
			b.ReportMetric(float64(rawP50.Microseconds()), "raw-p50-µs")
			b.ReportMetric(float64(percentile(raw, 0.99).Microseconds()), "raw-p99-µs")
			b.ReportMetric(float64(spawnP50.Microseconds()), "spawn-p50-µs")
			b.ReportMetric(float64(percentile(spawns, 0.99).Microseconds()), "spawn-p99-µs")
			b.ReportMetric(float64(spawnP50)/float64(2*rawP50), "ratio-p50")
		})
	}
}
