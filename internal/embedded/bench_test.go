package embedded

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/oneshot"
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

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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

// spawnStages are the parts of one spawn, as the run's events time them
// (every component runs in this process, on one clock): from the parent's
// tool call to the helper's admission (thread.spawned), from there to the
// helper's model call on its worker, on to the helper's end as the
// coordinator records it (thread.finished), and on to the parent's tool
// result.
var spawnStages = []string{"call-spawned", "spawned-model", "model-finished", "finished-result"}

// spawnTimes are one spawn's event times, in the order of spawnStages.
type spawnTimes [5]time.Time

// spawnRoundTrips runs one root that spawns n helpers one after another and
// returns each spawn's latency as its parent saw it, from the agent tool
// call to its result, and the times of each spawn's stages.
func spawnRoundTrips(tb testing.TB, s *Stack, n int) ([]time.Duration, []spawnTimes) {
	tb.Helper()
	nc, err := s.Connect("bench-client")
	if err != nil {
		tb.Fatal(err)
	}
	cl, err := oneshot.New(nc, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	var mu sync.Mutex
	byCall := map[string]*spawnTimes{}   // the parent's call id
	byThread := map[string]*spawnTimes{} // the helper's thread id
	var lat []time.Duration
	var order []*spawnTimes
	sink := event.SinkFunc(func(e event.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e.Depth == 0 && e.Tool == tools.AgentToolName && e.Type == event.ToolCall:
			st := &spawnTimes{0: e.Time}
			byCall[e.CallID] = st
			order = append(order, st)
		case e.Depth == 0 && e.Tool == tools.AgentToolName && e.Type == event.ToolResult:
			if st := byCall[e.CallID]; st != nil {
				st[4] = e.Time
				lat = append(lat, e.Time.Sub(st[0]))
			}
		case e.Depth == 1 && e.Type == event.ThreadSpawned:
			if st := byCall[e.CallID]; st != nil {
				st[1] = e.Time
				byThread[e.ThreadID] = st
			}
		case e.Depth == 1 && e.Type == event.ModelCall:
			if st := byThread[e.ThreadID]; st != nil {
				st[2] = e.Time
			}
		case e.Depth == 1 && e.Type == event.ThreadFinished:
			if st := byThread[e.ThreadID]; st != nil {
				st[3] = e.Time
			}
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
	var stages []spawnTimes
	for _, st := range order {
		if !slices.ContainsFunc(st[:], time.Time.IsZero) {
			stages = append(stages, *st)
		}
	}
	return lat, stages
}

// onBothConnections runs f as a sub-benchmark per kind of connection, on a
// stack of that kind, with the raw round trips it is compared with.
func onBothConnections(b *testing.B, f func(b *testing.B, s *Stack, raw []time.Duration)) {
	for _, tcp := range []bool{false, true} {
		name := "inproc"
		if tcp {
			name = "tcp"
		}
		b.Run(name, func(b *testing.B) {
			s := benchStack(b, tcp)
			f(b, s, rawRoundTrips(b, s, 2000))
		})
	}
}

// BenchmarkSpawnPath measures one spawn through the whole path (parent thread
// on one worker, coordinator, helper on the other worker, zero-latency sim
// model) next to a raw NATS request-reply on the same kind of connection, in
// the same run. ratio-p50 is spawn p50 / (2 × raw p50): the aim is ≤ 3.
func BenchmarkSpawnPath(b *testing.B) {
	onBothConnections(b, func(b *testing.B, s *Stack, raw []time.Duration) {
		// Roots of at most 200 helpers, so no conversation grows with b.N.
		b.ResetTimer()
		cpu0 := processCPU()
		var spawns []time.Duration
		var times []spawnTimes
		for left := max(b.N, 50); left > 0; left -= 200 {
			lat, st := spawnRoundTrips(b, s, min(left, 200))
			spawns, times = append(spawns, lat...), append(times, st...)
		}
		b.StopTimer()
		b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(len(spawns)), "cpu-µs/spawn")
		rawP50, spawnP50 := percentile(raw, 0.5), percentile(spawns, 0.5)
		b.ReportMetric(float64(rawP50.Microseconds()), "raw-p50-µs")
		b.ReportMetric(float64(percentile(raw, 0.99).Microseconds()), "raw-p99-µs")
		b.ReportMetric(float64(spawnP50.Microseconds()), "spawn-p50-µs")
		b.ReportMetric(float64(percentile(spawns, 0.99).Microseconds()), "spawn-p99-µs")
		b.ReportMetric(float64(spawnP50)/float64(2*rawP50), "ratio-p50")
		for i, stage := range spawnStages {
			d := make([]time.Duration, 0, len(times))
			for _, st := range times {
				d = append(d, st[i+1].Sub(st[i]))
			}
			if len(d) > 0 {
				b.ReportMetric(float64(percentile(d, 0.5).Nanoseconds())/1e3, stage+"-p50-µs")
			}
		}
	})
}

// BenchmarkSpawnShape times the spawn protocol's message pattern with no
// Formica code in it, next to a raw round trip on the same server: a parent
// requests a helper of the coordinator, the coordinator requests its
// placement of a worker, the worker answers accepted and then its result,
// and the coordinator answers the parent. Each hop is an async subscription
// on its own connection, as in the stack. ratio-p50 is the pattern's p50 /
// (2 × raw p50): the floor of BenchmarkSpawnPath's ratio-p50 for a path of
// these five messages, whatever the code around them costs.
func BenchmarkSpawnShape(b *testing.B) {
	onBothConnections(b, func(b *testing.B, s *Stack, raw []time.Duration) {
		conn := func(name string) *nats.Conn {
			nc, err := s.Connect(name)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(nc.Close)
			return nc
		}
		parent, coord, worker := conn("shape-parent"), conn("shape-coordinator"), conn("shape-worker")
		if _, err := worker.Subscribe("shape.exec", func(m *nats.Msg) {
			worker.Publish(m.Reply, []byte("accepted"))
			worker.Publish(m.Reply, m.Data)
		}); err != nil {
			b.Fatal(err)
		}
		// The coordinator's placements: one reply subject per spawn,
		// whose second reply (the result) answers the parent.
		var mu sync.Mutex
		waiting := map[string]*nats.Msg{}
		seen := map[string]bool{}
		var seq int
		if _, err := coord.Subscribe("shape.reply.*", func(m *nats.Msg) {
			mu.Lock()
			first := !seen[m.Subject]
			seen[m.Subject] = true
			spawn := waiting[m.Subject]
			if !first {
				delete(waiting, m.Subject)
				delete(seen, m.Subject)
			}
			mu.Unlock()
			if !first {
				spawn.Respond(m.Data)
			}
		}); err != nil {
			b.Fatal(err)
		}
		if _, err := coord.Subscribe("shape.spawn", func(m *nats.Msg) {
			mu.Lock()
			seq++
			reply := fmt.Sprintf("shape.reply.%d", seq)
			waiting[reply] = m
			mu.Unlock()
			coord.PublishRequest("shape.exec", reply, m.Data)
		}); err != nil {
			b.Fatal(err)
		}
		worker.Flush()
		coord.Flush()
		payload := make([]byte, 128)
		b.ResetTimer()
		cpu0 := processCPU()
		spawns := make([]time.Duration, max(b.N, 2000))
		for i := range spawns {
			t0 := time.Now()
			if _, err := parent.Request("shape.spawn", payload, 5*time.Second); err != nil {
				b.Fatal(err)
			}
			spawns[i] = time.Since(t0)
		}
		b.StopTimer()
		b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(len(spawns)), "cpu-µs/spawn")
		rawP50, shapeP50 := percentile(raw, 0.5), percentile(spawns, 0.5)
		b.ReportMetric(float64(rawP50.Microseconds()), "raw-p50-µs")
		b.ReportMetric(float64(shapeP50.Microseconds()), "shape-p50-µs")
		b.ReportMetric(float64(shapeP50)/float64(2*rawP50), "ratio-p50")
	})
}
