package bench

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/embedded"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/metrics"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/oneshot"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/tools"
	"github.com/formica-run/formica/internal/wire"
)

// maxPayload lets a 10,000-helper run's record (about 2.5 MB of msgpack)
// come back in one message: the bench stacks run without the durable store,
// so there is no object store to move large payloads to, and the default
// 1 MiB would refuse it.
const maxPayload = 64 << 20

// startServer starts an embedded NATS server, listening on loopback when
// tcp; with JetStream stored under dataDir when that is not empty.
func startServer(ctx context.Context, tcp bool, dataDir string) (*broker.Server, error) {
	cfg := broker.ServerConfig{MaxPayload: maxPayload}
	if tcp {
		cfg.Listen = "127.0.0.1:-1"
	}
	if dataDir != "" {
		cfg.JetStream, cfg.DataDir = true, dataDir
	}
	return broker.StartServer(ctx, cfg)
}

// dialer opens connections of one kind to srv.
func dialer(srv *broker.Server, tcp bool) func(name string) (*nats.Conn, error) {
	if tcp {
		return func(name string) (*nats.Conn, error) {
			return nats.Connect(srv.ClientURL(), nats.Name(name))
		}
	}
	return func(name string) (*nats.Conn, error) { return srv.Connect(name) }
}

// cluster is a server of its own and a stack on it, plus a client.
type cluster struct {
	srv     *broker.Server
	dial    func(name string) (*nats.Conn, error)
	stack   *embedded.Stack
	nc      *nats.Conn
	client  *oneshot.Client
	cwd     string
	dataDir string
}

// startCluster starts a server, a coordinator and workers of slots each,
// every component on its own connection of the chosen kind, the workers'
// models opened by models (nil: the providers, the sim model among them).
// With Settings.Journal, the server runs JetStream and the stack its run
// store, so every thread journals its life (as in a cluster); with
// Settings.Metrics the stack records its metrics.
func (b *suite) startCluster(ctx context.Context, tcp bool, workers, slots int, models runner.ModelOpener) (_ *cluster, err error) {
	if models == nil {
		models = runner.ModelOpenerFunc(providers.Open)
	}
	c := &cluster{}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	if b.set.Journal {
		if c.dataDir, err = os.MkdirTemp("", "formica-bench-js"); err != nil {
			return nil, err
		}
	}
	if c.srv, err = startServer(ctx, tcp, c.dataDir); err != nil {
		return nil, err
	}
	c.dial = dialer(c.srv, tcp)
	var mx *metrics.Metrics
	if b.set.Metrics {
		mx = metrics.New(metrics.All)
	}
	c.stack, err = embedded.Start(ctx, embedded.Config{Connect: c.dial, LocalServer: c.srv, Workers: workers, Slots: slots,
		Models: models, Coordinator: benchCoordinator, Durable: b.set.Journal,
		Metrics: mx, MaxToolCalls: benchMaxToolCalls})
	if err != nil {
		return nil, err
	}
	if err = c.attach(c.stack.Connect("bench-client")); err != nil {
		return nil, err
	}
	return c, nil
}

// attach makes nc the cluster's client connection, with a client on it and
// a working directory for its runs.
func (c *cluster) attach(nc *nats.Conn, err error) error {
	if err != nil {
		return err
	}
	c.nc = nc
	if c.client, err = oneshot.New(c.nc, nil); err != nil {
		return err
	}
	c.cwd, err = os.MkdirTemp("", "formica-bench")
	return err
}

func (c *cluster) stop() {
	if c.client != nil {
		c.client.Close()
	}
	if c.nc != nil {
		c.nc.Close()
	}
	if c.stack != nil {
		c.stack.Stop()
	}
	if c.srv != nil {
		c.srv.Shutdown()
	}
	if c.cwd != "" {
		os.RemoveAll(c.cwd)
	}
	if c.dataDir != "" {
		os.RemoveAll(c.dataDir)
	}
}

// messages are the messages the server has received and delivered so far.
func (c *cluster) messages() (in, out int64) {
	v, err := c.srv.NATS().Varz(nil)
	if err != nil {
		return 0, 0
	}
	return v.InMsgs, v.OutMsgs
}

// stored counts the messages JetStream holds: in every stream, and in the
// events stream; zero without JetStream.
func (c *cluster) stored() (all, events uint64) {
	if c.dataDir == "" {
		return 0, 0
	}
	info, err := c.srv.NATS().Jsz(&server.JSzOptions{Accounts: true, Streams: true})
	if err != nil {
		return 0, 0
	}
	for _, a := range info.AccountDetails {
		for _, st := range a.Streams {
			all += st.State.Msgs
			if st.Name == store.EventsStream {
				events += st.State.Msgs
			}
		}
	}
	return all, events
}

// rootAgent is the root of every bench run: the sim model with the agent
// tool and the default harness; helperLatency is each helper's sim latency.
func rootAgent(parallel bool, helperLatency time.Duration) spec.Agent {
	a := spec.Agent{Name: "bench", Model: providers.Sim, Tools: []string{tools.AgentToolName}, ParallelToolCalls: &parallel}
	if helperLatency > 0 {
		a.Helper.ModelArgs = model.Args{"latency_ms": float64(helperLatency) / float64(time.Millisecond)}
	}
	return a
}

// listTask is a task the sim model splits into n helpers.
func listTask(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "- part %d\n", i)
	}
	return b.String()
}

// toolTimes collects the times of the root's agent calls and their results,
// as the root's worker stamped them.
type toolTimes struct {
	mu      sync.Mutex
	calls   map[string]time.Time
	results map[string]time.Time
}

func (t *toolTimes) add(e event.Event) {
	if e.Tool != tools.AgentToolName || e.Depth != 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch e.Type {
	case event.ToolCall:
		t.calls[e.CallID] = e.Time
	case event.ToolResult:
		t.results[e.CallID] = e.Time
	}
}

// latencies are each call's time to its result.
func (t *toolTimes) latencies() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []time.Duration
	for id, end := range t.results {
		if start, ok := t.calls[id]; ok {
			out = append(out, end.Sub(start))
		}
	}
	return out
}

// span is from the first call to the last result.
func (t *toolTimes) span() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.calls) == 0 || len(t.results) == 0 {
		return 0
	}
	first := slices.MinFunc(slices.Collect(maps.Values(t.calls)), time.Time.Compare)
	last := slices.MaxFunc(slices.Collect(maps.Values(t.results)), time.Time.Compare)
	return last.Sub(first)
}

func (t *toolTimes) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.results)
}

// runOpts shape one bench run.
type runOpts struct {
	task   string
	agent  spec.Agent
	limits limits.Config
	// times, when set, receives the root's agent tool events.
	times *toolTimes
}

// run submits a run, waits for its record and checks it succeeded.
func (c *cluster) run(ctx context.Context, o runOpts) (record.Run, error) {
	runID := uuid.NewString()
	if o.times != nil {
		o.times.calls, o.times.results = map[string]time.Time{}, map[string]time.Time{}
		sub, err := c.nc.Subscribe(wire.SubjectEvents(runID)+".tool.*", func(m *nats.Msg) {
			e, err := event.Unmarshal(m.Data)
			if err == nil {
				o.times.add(e)
			}
		})
		if err != nil {
			return record.Run{}, err
		}
		sub.SetPendingLimits(-1, -1)
		defer func() {
			c.nc.FlushTimeout(5 * time.Second)
			sub.Drain()
		}()
	}
	rec, err := c.client.Run(ctx, wire.RunSubmit{RunID: runID, Task: o.task, Agent: o.agent,
		Limits: o.limits, Cwd: c.cwd}, nil, nil)
	if err != nil {
		return rec, err
	}
	if rec.Status != event.Succeeded {
		return rec, fmt.Errorf("run %s: %s", rec.Status, rec.Error)
	}
	if o.times != nil {
		// Events travel beside the final reply: wait (bounded) for the last.
		want := 0
		for _, th := range rec.Threads {
			if th.Depth == 1 {
				want++
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for o.times.count() < want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := o.times.count(); got < want {
			return rec, fmt.Errorf("saw %d of %d spawn results", got, want)
		}
	}
	return rec, nil
}

// fanout runs one root that spawns n helpers at once and returns its
// makespan: from its first agent call to its last result.
func (c *cluster) fanout(ctx context.Context, n int, latency time.Duration) (time.Duration, error) {
	var times toolTimes
	_, err := c.run(ctx, runOpts{task: listTask(n), agent: rootAgent(true, latency),
		limits: limits.Config{MaxThreads: n}, times: &times})
	if err != nil {
		return 0, err
	}
	return times.span(), nil
}

// percentile returns the p-quantile of d (sorted in place).
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[int(math.Round(float64(len(d)-1)*p))]
}

func us(d time.Duration) float64 { return round(float64(d)/float64(time.Microsecond), 1) }
func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 2) }

func round(f float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(f*p) / p
}
