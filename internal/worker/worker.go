// Package worker is Formica's data plane: a process that registers with the
// coordinators over NATS, accepts threads placed on it, runs their agent loops
// with its own tools and model credentials, and reports back.
//
// Each hosted thread is a record (hosted) with the cancel function of its
// context, set before the thread can be named, so a cancel is never lost;
// its progress and its one final reply are ordered by the record, so the
// final reply is always its last. The agent loop runs on its own goroutine
// and holds one of the worker's slots while it executes — but not while it
// waits for its helpers, so parents never starve the fleet. A call waiting
// on its helper is a record too (spawnCall), not a goroutine.
package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/formica-run/formica/internal/ids"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/formica-run/formica/internal/mcp"
	"github.com/formica-run/formica/internal/metrics"
	"github.com/formica-run/formica/internal/pricing"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/transport/natstransport"
	"github.com/formica-run/formica/internal/wire"
)

// Defaults.
const (
	DefaultSlots             = 16
	DefaultHeartbeatInterval = wire.DefaultHeartbeatInterval
	// MissedHeartbeats of silence mean a peer is lost.
	MissedHeartbeats = wire.MissedHeartbeats
)

// Config configures a Worker; zero values mean defaults.
type Config struct {
	// ID names the worker; one token (no dots or spaces). Default: host-<random>.
	ID string
	// Slots is how many threads may execute at once.
	Slots int
	// Conn is the NATS connection. Required.
	Conn *nats.Conn
	// Models opens model references with this process's credentials. Required.
	Models  runner.ModelOpener
	Harness runner.HarnessConfig
	// HeartbeatInterval paces worker heartbeats and progress on running threads.
	HeartbeatInterval time.Duration
	// Offloader, when set, carries messages larger than the NATS max payload
	// (a large result, say) through the JetStream object store.
	Offloader natstransport.Offloader
	// AllowScripted lets threads use scripted:<file> models, which read a
	// file of this machine named by the run; off, they are refused. Tests
	// and `formica run` set it.
	AllowScripted bool
	// Journal, when set, opens the journal of one placement of a thread
	// (run, thread, the placement's token and journal proof): hosted
	// threads journal their life there.
	Journal func(run, thread, token, proof string) runner.ThreadJournal
	Logger  *slog.Logger
	// MCP, when set, is the operator's MCP servers (--mcp-config): threads
	// whose spec names them get their tools, and heartbeats announce them.
	MCP *mcp.Pool
	// Metrics, when set, receives the model and tool call metrics of the
	// threads hosted here and, unless a coordinator in the same process
	// reports the fleet, this worker's slot gauges.
	Metrics *metrics.Metrics
	// Prices prices the model calls of the threads hosted here (--prices);
	// nil: the built-in defaults.
	Prices *pricing.Table
	// MaxToolCalls bounds the tool calls of one model response that run
	// (--max-tool-calls); 0: runner.DefaultMaxToolCalls.
	MaxToolCalls int
}

// Worker hosts threads. Create with New, then Start.
type Worker struct {
	cfg    Config
	host   string
	tr     *natstransport.Transport
	runner *runner.Runner
	slots  chan struct{}
	// accepted is the answer of every placement taken, encoded once.
	accepted wire.Msg

	setups setups // the thread setups placements named, by hash

	mu      sync.Mutex
	threads map[string]*hosted    // by thread id
	idle    chan struct{}         // closed when the last hosted thread goes (idleSignal)
	coords  map[string]*coordSeen // coordinator id -> liveness
	// alive is the latest time the process was noted running; stoodStill
	// is when the latest standstill was noticed, and gaps the standstills
	// not logged yet (standstill.go).
	alive      time.Time
	stoodStill time.Time
	gaps       []time.Duration

	draining atomic.Bool
	leaving  atomic.Bool // its last heartbeat says so
	started  time.Time
	subs     []transport.Subscription
	natsSubs []*nats.Subscription
	svc      micro.Service
	stop     chan struct{}
	loops    sync.WaitGroup
	state    atomic.Int32 // 0 new, 1 started, 2 stopped
}

// New checks cfg and builds a worker.
func New(cfg Config) (*Worker, error) {
	if cfg.Conn == nil || cfg.Models == nil {
		return nil, fmt.Errorf("%w: a NATS connection and a model opener are required", ErrBadConfig)
	}
	cfg.Slots = cmp.Or(cfg.Slots, DefaultSlots)
	if cfg.Slots < 0 {
		return nil, fmt.Errorf("%w: slots %d", ErrBadConfig, cfg.Slots)
	}
	if cfg.MaxToolCalls < 0 {
		return nil, fmt.Errorf("%w: max tool calls %d", ErrBadConfig, cfg.MaxToolCalls)
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	host, _ := os.Hostname()
	if cfg.ID == "" {
		cfg.ID = NewID()
	}
	if err := ids.CheckToken(cfg.ID); err != nil {
		return nil, fmt.Errorf("%w: id: %w", ErrBadConfig, err)
	}
	tr, err := natstransport.New(cfg.Conn, natstransport.Config{Logger: cfg.Logger, Offloader: cfg.Offloader, MayCarryRef: wire.MayCarryRef,
		Sender: store.ToWorker(cfg.ID),
		// Its own inbox, with credentials or without: a coordinator puts a
		// large reply sent there into this worker's place.
		InboxPrefix: wire.WorkerInboxPrefix + cfg.ID})
	if err != nil {
		return nil, err
	}
	w := &Worker{
		cfg:      cfg,
		host:     host,
		tr:       tr,
		slots:    make(chan struct{}, cfg.Slots),
		accepted: wire.Message(wire.TypeExecAccepted, wire.ExecAccepted{Worker: cfg.ID}),
		threads:  map[string]*hosted{},
		coords:   map[string]*coordSeen{},
		stop:     make(chan struct{}),
	}
	var models runner.ModelOpener = accounted{inner: cfg.Models, prices: cfg.Prices, mx: cfg.Metrics}
	if !cfg.AllowScripted {
		models = noScripted{models}
	}
	rc := runner.Config{
		Models:    models,
		CallGuard: w.guard,
		Spawner:   (*spawner)(w),
		Approver:  (*approver)(w),
		Events:    (*eventSink)(w),
		Journal:   w.journal(),
		Harness:   cfg.Harness,
		Logger:    cfg.Logger,

		MaxToolCalls: cfg.MaxToolCalls,
	}
	if cfg.MCP != nil {
		rc.MCP = cfg.MCP
	}
	if cfg.Metrics != nil {
		rc.Observer = cfg.Metrics
		cfg.Metrics.WorkerLoad(w.load)
	}
	w.runner, err = runner.New(rc)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// load is this worker's own figures for the slot gauges.
func (w *Worker) load() metrics.Load {
	if w.state.Load() != 1 {
		return metrics.Load{} // not started, or stopped: not a worker of the fleet
	}
	hosted, running := w.Hosted(), w.Running()
	l := metrics.Load{Slots: w.cfg.Slots, Used: running, Parked: max(0, hosted-running)}
	if w.draining.Load() {
		l.Draining = 1
	} else {
		l.Live = 1
	}
	return l
}

// Ready reports whether the worker takes threads: started, not draining,
// and connected to NATS.
func (w *Worker) Ready() error {
	switch {
	case w.state.Load() != 1:
		return errors.New("worker not running")
	case w.draining.Load():
		return errors.New("worker draining")
	case !w.cfg.Conn.IsConnected():
		return errors.New("NATS not connected")
	}
	return nil
}

// ID returns the worker's id.
func (w *Worker) ID() string { return w.cfg.ID }

// Start subscribes to the worker's subjects, registers as the micro service
// formica-worker, and starts heartbeating. The first heartbeat is sent before
// Start returns, so coordinators can place work at once.
func (w *Worker) Start(ctx context.Context) error {
	if !w.state.CompareAndSwap(0, 1) {
		return fmt.Errorf("%w: already started", ErrBadConfig)
	}
	w.started = time.Now()
	w.mu.Lock()
	w.alive = w.started
	w.mu.Unlock()
	if err := w.addService(); err != nil {
		return err
	}
	// Placements go through the micro service, which counts them.
	exec, err := w.tr.ServeMicro(w.svc, "exec", wire.SubjectExec(w.cfg.ID), 0, w.handleExec)
	if err != nil {
		w.svc.Stop()
		return err
	}
	cancel, err := w.tr.Serve(wire.SubjectCancel(w.cfg.ID), "", 0, w.handleCancel)
	if err != nil {
		exec.Stop()
		return err
	}
	w.subs = []transport.Subscription{exec, cancel}
	hb, err := w.cfg.Conn.Subscribe(wire.SubjectCoordHeartbeats, w.handleCoordHeartbeat)
	if err != nil {
		w.stopSubs()
		return err
	}
	w.natsSubs = append(w.natsSubs, hb)
	if err := w.tr.Flush(ctx); err != nil {
		w.stopSubs()
		return err
	}
	w.heartbeat(ctx)
	w.loops.Add(1)
	go w.tick()
	w.cfg.Logger.Info("worker started", "id", w.cfg.ID, "slots", w.cfg.Slots)
	return nil
}

// Drain stops taking threads, lets running ones finish within grace, then
// cancels what is left and stops. It is what SIGTERM does.
func (w *Worker) Drain(grace time.Duration) error {
	w.draining.Store(true)
	w.heartbeat(context.Background())
	w.waitIdle(grace)
	w.cancelAll(errors.New("worker draining: grace period over"))
	return w.Stop()
}

// waitIdle waits, at most timeout, until no thread is hosted here.
func (w *Worker) waitIdle(timeout time.Duration) {
	w.mu.Lock()
	if len(w.threads) == 0 {
		w.mu.Unlock()
		return
	}
	if w.idle == nil {
		w.idle = make(chan struct{})
	}
	idle := w.idle
	w.mu.Unlock()
	select {
	case <-idle:
	case <-time.After(timeout):
	}
}

// Stop cancels every hosted thread, waits (bounded) for their final replies,
// and unsubscribes. Safe to call twice.
func (w *Worker) Stop() error {
	if !w.state.CompareAndSwap(1, 2) {
		return nil
	}
	w.draining.Store(true)
	w.cancelAll(errors.New("worker stopping"))
	w.waitIdle(5 * time.Second)
	w.leaving.Store(true)
	w.heartbeat(context.Background()) // so its coordinators count it gone, not lost
	close(w.stop)
	w.loops.Wait()
	var errs []error
	if w.svc != nil {
		errs = append(errs, w.svc.Stop())
	}
	errs = append(errs, w.stopSubs())
	return errors.Join(errs...)
}

func (w *Worker) stopSubs() error {
	var errs []error
	for _, s := range w.subs {
		errs = append(errs, s.Stop())
	}
	for _, s := range w.natsSubs {
		errs = append(errs, s.Unsubscribe())
	}
	if w.state.Load() == 2 {
		errs = append(errs, w.tr.Close())
	}
	return errors.Join(errs...)
}

// Hosted is the number of threads on this worker, executing or parked.
func (w *Worker) Hosted() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.threads)
}

// Running is the number of threads holding a slot.
func (w *Worker) Running() int { return len(w.slots) }

// tick sends heartbeats, progress on every hosted thread, and stops
// threads whose coordinator went silent.
func (w *Worker) tick() {
	defer w.loops.Done()
	t := time.NewTicker(w.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		w.mu.Lock()
		w.noteAliveLocked(time.Now())
		w.mu.Unlock()
		w.logStandstills()
		w.heartbeat(context.Background())
		w.mu.Lock()
		now := time.Now()
		live := make([]*hosted, 0, len(w.threads))
		var orphans []*hosted
		for _, h := range w.threads {
			live = append(live, h)
			if c := w.coords[h.coord]; c != nil && !c.fresh(now) {
				orphans = append(orphans, h)
			}
		}
		w.mu.Unlock()
		for _, h := range live {
			h.progress()
		}
		for _, h := range orphans {
			w.fence(h, fmt.Errorf("%w: coordinator %s went silent", errLapsed, h.coord), "placement lapsed: cancelling thread",
				"coordinator", h.coord)
		}
	}
}

func (w *Worker) heartbeat(ctx context.Context) {
	hosted, running := w.Hosted(), w.Running()
	hb := wire.WorkerHeartbeat{
		ID: w.cfg.ID, Host: w.host, Slots: w.cfg.Slots, Running: running, Parked: max(0, hosted-running),
		Draining: w.draining.Load(), Leaving: w.leaving.Load(), Started: w.started, Interval: w.cfg.HeartbeatInterval,
		Sandbox: w.sandboxState(), MCP: w.cfg.MCP.Names(),
	}
	if err := w.tr.Publish(ctx, wire.SubjectWorkerHeartbeat(w.cfg.ID), wire.Message(wire.TypeWorkerHeartbeat, hb)); err != nil {
		w.cfg.Logger.Warn("heartbeat", "err", err)
	}
}

func (w *Worker) handleCoordHeartbeat(m *nats.Msg) {
	if natstransport.FromStream(m) {
		w.cfg.Logger.Warn("dropped a stream's message delivered as a coordinator heartbeat")
		return
	}
	var hb wire.CoordHeartbeat
	if err := wire.DecodeAs(m.Data, wire.TypeCoordHeartbeat, &hb); err != nil {
		w.cfg.Logger.Warn("bad coordinator heartbeat", "err", err)
		return
	}
	w.seeCoordinator(hb.ID, hb.Epoch, hb.Uptime, hb.Interval)
	var restarted []string
	w.mu.Lock()
	for id, h := range w.threads {
		if h.coord == hb.ID && h.epoch != hb.Epoch {
			restarted = append(restarted, id)
		}
	}
	w.mu.Unlock()
	for _, id := range restarted {
		w.fenceThread(id, 0, "coordinator "+hb.ID+" restarted")
	}
	for _, f := range hb.Fenced {
		if f.Worker == w.cfg.ID {
			w.fenceThread(f.ThreadID, f.Attempt, "coordinator "+hb.ID+" placed the thread again")
		}
	}
}

// seeCoordinator records a message coordinator id sent at age uptime.
func (w *Worker) seeCoordinator(id, epoch string, uptime, interval time.Duration) {
	w.mu.Lock()
	w.coordLocked(id).see(epoch, uptime, interval, time.Now())
	w.mu.Unlock()
}

// coordLocked returns what this worker knows of coordinator id, adding it
// if it knew nothing. w.mu is held.
func (w *Worker) coordLocked(id string) *coordSeen {
	c := w.coords[id]
	if c == nil {
		c = &coordSeen{}
		w.coords[id] = c
	}
	return c
}

func (w *Worker) cancelAll(cause error) {
	w.mu.Lock()
	cancels := make([]context.CancelCauseFunc, 0, len(w.threads))
	for _, h := range w.threads {
		cancels = append(cancels, h.cancel)
	}
	w.mu.Unlock()
	for _, cancel := range cancels {
		cancel(cause)
	}
}

// NewID returns a fresh worker id: this host's name and a random suffix.
func NewID() string {
	host, _ := os.Hostname()
	return token(host) + "-" + uuid.NewString()[:8]
}

func token(s string) string {
	return cmp.Or(strings.Map(func(r rune) rune {
		if r == '.' || r == ' ' || r == '*' || r == '>' {
			return '-'
		}
		return r
	}, s), "worker")
}

// sandboxState is the heartbeat's sandbox field: whether tool calls here
// run confined.
func (w *Worker) sandboxState() string {
	if w.cfg.Harness.Sandbox != nil {
		return "on"
	}
	return "off"
}
