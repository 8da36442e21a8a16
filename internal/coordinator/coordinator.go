// Package coordinator is Formica's control plane: it owns runs, keeps each
// run's depth and thread accounting in memory (DESIGN rule 8), admits or
// refuses spawns, places threads on the least loaded live worker over NATS,
// notices lost workers and places their threads again, routes approvals, and
// answers each run's submitter with the run's record.
//
// Its files follow its concepts: runs and spawn admission (execute.go,
// run.go, spawn.go, queue.go, requests.go), placement (exec.go,
// placement.go, registry.go), events (relay.go, publisher.go,
// eventsend.go), approvals (approvals.go), the endpoints' quotas
// (quota.go), the journal (journal.go), large bodies (transfers.go), and
// the thread messages workers send (handlers.go, keepalive.go).
package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/formica-run/formica/internal/ids"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/metrics"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/transport/natstransport"
	"github.com/formica-run/formica/internal/wire"
)

// Defaults.
const (
	DefaultHeartbeatInterval = wire.DefaultHeartbeatInterval
	DefaultPlacementTimeout  = 5 * time.Minute
	DefaultMaxAttempts       = 3
	DefaultApprovalTimeout   = 10 * time.Minute
	DefaultMaxRuns           = 8
	DefaultMaxWorkerSlots    = 256
	// DefaultRunTimeout is the deadline of a queued run that asks none.
	DefaultRunTimeout = time.Hour
	// MissedHeartbeats of silence mean a peer is lost.
	MissedHeartbeats = wire.MissedHeartbeats
	// SilencePatience bounds how long a placement may stay silent while its
	// worker's heartbeats keep coming (see placement.silent).
	SilencePatience = time.Minute
	// DefaultTransfersSweep paces the removal of the drained transfers
	// buckets of earlier versions (sweepTransfers).
	DefaultTransfersSweep = time.Hour
)

// Config configures a Coordinator; zero values mean defaults.
type Config struct {
	// ID names the coordinator; one subject token. Default: a random UUID.
	ID string
	// Conn is the NATS connection. Required.
	Conn *nats.Conn
	// HeartbeatInterval paces the coordinator's heartbeat and the progress it
	// sends on long requests.
	HeartbeatInterval time.Duration
	// PlacementTimeout bounds how long a thread waits for a free slot.
	PlacementTimeout time.Duration
	// MaxAttempts bounds how often a thread is placed after its worker is lost.
	MaxAttempts int
	// ApprovalTimeout is how long an approval may wait for its answer; then it
	// is denied.
	ApprovalTimeout time.Duration
	// Store, when set, is the durable state: the coordinator takes queued
	// runs from it, records them, and holds approvals of queued runs there.
	Store *store.Store
	// MaxRuns is how many queued runs this coordinator runs at once that
	// are doing something (its run slots; see slots.go).
	MaxRuns int
	// LeaseTTL is how long a queued run's lease may go unrenewed before
	// another coordinator takes the run over (default DefaultLeaseTTL).
	LeaseTTL time.Duration
	// RunIdle is how long none of a run's threads may report anything
	// before the run gives its run slot back: a run that only waits (a
	// model that does not answer, an approval) does not keep queued runs
	// from starting. Default DefaultRunIdle; negative: a run keeps its
	// slot to its end.
	RunIdle time.Duration
	// MaxIdleRuns bounds the runs held beside the run slots, those that
	// gave theirs back. Default DefaultMaxIdleRuns; negative: none.
	MaxIdleRuns int
	// TransfersSweep is how often, with a Store, the coordinator removes the
	// transfers buckets of earlier versions that hold no body any more,
	// until none is left.
	TransfersSweep time.Duration
	// Ceilings cap what a submission may ask (zero fields: the defaults).
	Ceilings limits.Ceilings
	// RunTimeout is the deadline of a queued run that asks none; past it
	// the run's tree is cancelled and the run fails ("deadline exceeded").
	// Default DefaultRunTimeout; at most Ceilings.MaxRunTimeout.
	RunTimeout time.Duration
	Logger     *slog.Logger
	NewID      func() string
	Now        func() time.Time

	// MaxWorkerSlots caps the slots a worker may announce: one worker
	// claiming a huge number would otherwise attract every placement.
	MaxWorkerSlots int
	// AllowScripted lets submitted runs name scripted:<file> models (a file
	// path on the workers); off, they are refused. Tests set it.
	AllowScripted bool
	// Metrics, when set, receives the control plane's metrics (runs,
	// queue, tree, placements, fleet, approvals).
	Metrics *metrics.Metrics

	// Interest, when set, says whether anything subscribes to a subject (a
	// watcher, a `nats sub`, a stream): an event nobody would receive is
	// not encoded nor published. Nil publishes every event, as over an
	// external NATS, where the coordinator cannot tell (broker.Server's
	// InterestOf tells for an embedded one).
	Interest func(subject string) bool

	// Cwd is the harness directory, on the workers, of queued runs that
	// were submitted without one (`formica submit` leaves it to the
	// coordinator); default: this process's working directory.
	Cwd string

	// Webhooks are the calls made when runs end; they need a Store.
	Webhooks WebhookConfig
}

// ownTransport is a transport the coordinator made and closes when it
// stops.
type ownTransport interface {
	transport.Transport
	Close() error
}

// Coordinator runs the control plane on one NATS connection.
type Coordinator struct {
	cfg      Config
	tr       ownTransport
	execTr   ownTransport // placements' requests
	registry *registry

	// epoch names this incarnation; born is its start on the monotonic clock.
	epoch string
	born  time.Time
	// signer signs this incarnation's placement proofs (with a store);
	// keyPublished is when its key was last published (UnixNano).
	signer       *journal.Signer
	keyPublished atomic.Int64

	mu        sync.Mutex
	runs      map[string]*run
	decisions map[string]chan store.Approval // held approval id -> its waiting thread
	fenced    []fencedEntry

	background context.Context // ends when the coordinator stops
	stopBg     context.CancelFunc
	taking     context.Context // ends when the coordinator stops taking queued runs
	stopTaking context.CancelFunc
	draining   atomic.Bool
	idle       chan struct{} // closed when the last run ends; guarded by mu
	slots      chan struct{} // the run slots taken (slots.go)

	events   *publisher // every event leaves through it, in order
	alive    keepalive
	quotas   *quotas
	subs     []transport.Subscription
	natsSubs []*nats.Subscription
	stop     chan struct{}
	loops    sync.WaitGroup
	state    atomic.Int32
}

// New checks cfg and builds a coordinator.
func New(cfg Config) (*Coordinator, error) {
	if cfg.Conn == nil {
		return nil, fmt.Errorf("%w: a NATS connection is required", ErrBadConfig)
	}
	if cfg.NewID == nil {
		cfg.NewID = uuid.NewString
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ID == "" {
		cfg.ID = cfg.NewID()
	}
	if err := ids.CheckToken(cfg.ID); err != nil {
		return nil, fmt.Errorf("%w: id: %w", ErrBadConfig, err)
	}
	if err := cfg.Webhooks.check(cfg.Store != nil); err != nil {
		return nil, err
	}
	orDefault(&cfg.HeartbeatInterval, DefaultHeartbeatInterval)
	orDefault(&cfg.PlacementTimeout, DefaultPlacementTimeout)
	orDefault(&cfg.MaxAttempts, DefaultMaxAttempts)
	orDefault(&cfg.ApprovalTimeout, DefaultApprovalTimeout)
	orDefault(&cfg.MaxRuns, DefaultMaxRuns)
	orDefault(&cfg.LeaseTTL, DefaultLeaseTTL)
	cfg.RunIdle = cmp.Or(cfg.RunIdle, DefaultRunIdle)
	switch {
	case cfg.MaxIdleRuns == 0:
		cfg.MaxIdleRuns = DefaultMaxIdleRuns
	case cfg.MaxIdleRuns < 0:
		cfg.MaxIdleRuns = 0
	}
	orDefault(&cfg.TransfersSweep, DefaultTransfersSweep)
	orDefault(&cfg.MaxWorkerSlots, DefaultMaxWorkerSlots)
	cfg.Ceilings = cfg.Ceilings.WithDefaults()
	orDefault(&cfg.RunTimeout, min(DefaultRunTimeout, cfg.Ceilings.MaxRunTimeout))
	if cfg.RunTimeout > cfg.Ceilings.MaxRunTimeout {
		return nil, fmt.Errorf("%w: run timeout %v is above the max run timeout %v", ErrBadConfig, cfg.RunTimeout, cfg.Ceilings.MaxRunTimeout)
	}
	if cfg.Cwd == "" {
		cfg.Cwd, _ = os.Getwd()
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	tc := natstransport.Config{Logger: cfg.Logger, MayCarryRef: wire.MayCarryRef, Sender: senderOf,
		Recipient: recipientOf}
	if cfg.Store != nil {
		tc.Offloader = cfg.Store
	}
	tr, err := natstransport.New(cfg.Conn, tc)
	if err != nil {
		return nil, err
	}
	// Placements get an inbox of their own: workers may answer there, and
	// nowhere else among this coordinator's replies.
	tc.InboxPrefix = wire.ExecInboxPrefix
	execTr, err := natstransport.New(cfg.Conn, tc)
	if err != nil {
		tr.Close()
		return nil, err
	}
	c := &Coordinator{
		cfg:       cfg,
		tr:        tr,
		execTr:    execTr,
		epoch:     newToken(),
		born:      time.Now(),
		registry:  newRegistry(cfg.Now),
		runs:      map[string]*run{},
		decisions: map[string]chan store.Approval{},
		alive:     keepalive{repliers: map[*alivePing]struct{}{}},
		quotas:    newQuotas(),
		stop:      make(chan struct{}),
	}
	if cfg.Store != nil {
		if c.signer, err = journal.NewSigner(); err != nil {
			tr.Close()
			execTr.Close()
			return nil, err
		}
	}
	es := newEventSender(c)
	c.events = newPublisher(maxQueuedEvents, es.send, es.stored)
	cfg.Metrics.Quotas(c.quotaMetrics)
	c.quotas.reg.SetOnWait(func(key string, d time.Duration) { cfg.Metrics.QuotaWaited(c.quotas.name(key), d) })
	if cfg.Store != nil {
		cfg.Metrics.QueueDepth(func(ctx context.Context) (metrics.Queue, error) {
			p, ap, err := cfg.Store.QueueDepth(ctx)
			return metrics.Queue{Pending: p, AckPending: ap}, err
		})
	}
	return c, nil
}

// orDefault sets *v to def when it is not positive.
func orDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// ID returns the coordinator's id.
func (c *Coordinator) ID() string { return c.cfg.ID }

// Start subscribes to the coordinator's subjects and starts its heartbeat.
func (c *Coordinator) Start(ctx context.Context) error {
	if !c.state.CompareAndSwap(0, 1) {
		return fmt.Errorf("%w: already started", ErrBadConfig)
	}
	type served struct {
		subject, queue string
		h              transport.Handler
	}
	// Before any handler: they may start background work (see admit).
	c.background, c.stopBg = context.WithCancel(context.Background())
	c.taking, c.stopTaking = context.WithCancel(c.background)
	// Before anything is placed: proofs check only once the key is out.
	if err := c.publishKey(ctx); err != nil {
		return err
	}
	serve := []served{
		{wire.SubjectSubmit, wire.QueueCoordinators, c.handleSubmit},
		{wire.SubjectSpawn(c.cfg.ID, wire.AnyWorker), "", c.handleSpawn},
		{wire.SubjectApproval(c.cfg.ID, wire.AnyWorker), "", c.handleApproval},
		{wire.SubjectBudget(c.cfg.ID, wire.AnyWorker), "", answer(wire.TypeBudgetRenew, c.handleBudget)},
		{wire.SubjectPlacement(c.cfg.ID, wire.AnyWorker), "", answer(wire.TypePlacementCheck, c.handlePlacementCheck)},
		{wire.SubjectQuota(c.cfg.ID, wire.AnyWorker), "", c.handleQuota},
		{wire.SubjectThreadCancel(c.cfg.ID, wire.AnyWorker), "", answer(wire.TypeCancel, c.handleThreadCancel)},
		{wire.SubjectRunCancel, "", answer(wire.TypeCancel, c.handleRunCancel)},
		{wire.SubjectWorkers, wire.QueueCoordinators, c.handleWorkers},
	}
	if c.cfg.Store != nil {
		// What clients ask of the durable state: this coordinator writes it
		// (decisions on held approvals, queued runs, cancels, resumes).
		serve = append(serve,
			served{wire.SubjectApprovalDecide, wire.QueueCoordinators, answer(wire.TypeApprovalDecide, c.handleDecide)},
			served{wire.SubjectEnqueue, wire.QueueCoordinators, answer(wire.TypeRunSubmit, c.handleEnqueue)},
			served{wire.SubjectCancelRequest, wire.QueueCoordinators, answer(wire.TypeRunCancel, c.handleCancelRequest)},
			served{wire.SubjectResume, wire.QueueCoordinators, answer(wire.TypeRunResume, c.handleResume)},
			served{wire.SubjectAssets, wire.QueueCoordinators, c.handleAssets},
		)
	}
	for _, s := range serve {
		sub, err := c.tr.Serve(s.subject, s.queue, 0, s.h)
		if err != nil {
			c.stopSubs()
			return err
		}
		c.subs = append(c.subs, sub)
	}
	// The records of runs are kept from what the coordinator itself sees
	// (placements, results with each thread's own usage), not from events,
	// so it needs no subscription to the event firehose.
	hb, err := c.cfg.Conn.Subscribe(wire.SubjectWorkerHeartbeats, c.handleWorkerHeartbeat)
	if err != nil {
		c.stopSubs()
		return err
	}
	hb.SetPendingLimits(1<<20, 64<<20)
	c.natsSubs = append(c.natsSubs, hb)
	if err := c.tr.Flush(ctx); err != nil {
		c.stopSubs()
		return err
	}
	c.heartbeat()
	c.loops.Go(c.tick)
	c.loops.Go(c.keepAlive)
	if c.cfg.Store != nil {
		// A consumer takes a run slot to take a run; the run may give
		// it back while it runs on (slots.go).
		c.slots = make(chan struct{}, c.cfg.MaxRuns)
		c.loops.Go(func() { c.watchApprovals(c.background) })
		// Its consumer is there once Start returns; one that fails now
		// is made again in the loop.
		leases, err := c.cfg.Store.WatchLeases(c.background)
		if err != nil {
			c.cfg.Logger.Warn("watch run leases", "err", err)
		}
		c.loops.Go(func() { c.watchLeases(c.background, leases) })
		c.loops.Go(c.sweepTransfers)
		c.loops.Go(c.countAssets)
		for range c.cfg.MaxRuns + c.cfg.MaxIdleRuns {
			c.loops.Go(func() { c.consume(c.background) })
		}
		if err := c.startWebhooks(); err != nil {
			c.cfg.Logger.Warn("webhooks not delivered", "err", err)
		}
	}
	c.cfg.Logger.Info("coordinator started", "id", c.cfg.ID)
	return nil
}

// Stop cancels every run it owns, waits (bounded) for them to end, and
// unsubscribes. Safe to call twice.
func (c *Coordinator) Stop() error {
	if !c.state.CompareAndSwap(1, 2) {
		return nil
	}
	c.mu.Lock()
	for _, r := range c.runs {
		r.cancel(errStopping)
	}
	c.mu.Unlock()
	c.stopBg()
	c.waitIdle(10 * time.Second)
	close(c.stop)
	c.loops.Wait()
	c.events.flush(flushTimeout)
	return c.stopSubs()
}

func (c *Coordinator) stopSubs() error {
	var errs []error
	for _, s := range c.subs {
		errs = append(errs, s.Stop())
	}
	for _, s := range c.natsSubs {
		errs = append(errs, s.Unsubscribe())
	}
	if c.state.Load() == 2 {
		errs = append(errs, c.tr.Close(), c.execTr.Close())
	}
	return errors.Join(errs...)
}

func (c *Coordinator) liveRuns() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.runs)
}

// Workers lists the live workers.
func (c *Coordinator) Workers() []wire.WorkerInfo { return c.registry.list() }

// tick heartbeats and sweeps lost workers.
func (c *Coordinator) tick() {
	c.every(c.cfg.HeartbeatInterval, false, func() bool {
		c.heartbeat()
		c.republish()
		for _, id := range c.registry.sweep(MissedHeartbeats) {
			c.workerGone(id, "no heartbeat", true)
		}
		return true
	})
}

// keepAlive sends progress on every long request in flight once per
// interval. It has a loop of its own: with thousands of spawns in flight a
// round of progress can outlast an interval on a busy machine, and the
// heartbeat, which every worker's lease hangs on, must not wait for it (a
// late round only delays the next one).
func (c *Coordinator) keepAlive() {
	c.every(c.cfg.HeartbeatInterval, false, func() bool { c.alive.ping(); return true })
}

// every calls f once per d, and first at once when now, until the
// coordinator stops or f returns false.
func (c *Coordinator) every(d time.Duration, now bool, f func() bool) {
	if now && !f() {
		return
	}
	ticks(c.stop, d, f)
}

func (c *Coordinator) heartbeat() {
	if !c.leasesFresh() {
		c.cfg.Logger.Warn("heartbeat held back: a run lease is not renewed yet")
		return
	}
	hb := wire.CoordHeartbeat{ID: c.cfg.ID, Interval: c.cfg.HeartbeatInterval, Epoch: c.epoch,
		Uptime: c.uptime(), Fenced: c.fencedNow()}
	m := wire.Message(wire.TypeCoordHeartbeat, hb)
	if err := c.tr.Publish(context.Background(), wire.SubjectCoordHeartbeats, m); err != nil {
		c.cfg.Logger.Warn("heartbeat", "err", err)
	}
}

func (c *Coordinator) handleWorkerHeartbeat(m *nats.Msg) {
	if natstransport.FromStream(m) {
		c.refuse(m.Subject, errors.New("a stream's message delivered as a heartbeat"))
		return
	}
	var hb wire.WorkerHeartbeat
	if err := wire.DecodeAs(m.Data, wire.TypeWorkerHeartbeat, &hb); err != nil {
		c.cfg.Logger.Warn("bad worker heartbeat", "err", err)
		return
	}
	if sender := wire.SenderOf(m.Subject); hb.ID != sender {
		c.refuse(m.Subject, fmt.Errorf("heartbeat names worker %q", hb.ID))
		return
	}
	if hb.Leaving {
		if c.registry.forget(hb.ID) {
			c.workerGone(hb.ID, "drained", false)
		}
		return
	}
	hb.Slots = min(hb.Slots, c.cfg.MaxWorkerSlots)
	if c.registry.heartbeat(hb) {
		c.cfg.Logger.Info("worker joined", "worker", hb.ID, "host", hb.Host, "slots", hb.Slots)
		// Every live run may place its next helpers there.
		c.publishToRuns(event.Event{Type: event.WorkerJoined, Worker: hb.ID, Reason: hb.Host}, func(*run) bool { return true })
	}
}

// uptime is the coordinator's age on the monotonic clock.
func (c *Coordinator) uptime() time.Duration { return time.Since(c.born) }

// workerGone settles worker id, gone: lost (silent, not answering), or
// stopped cleanly (its last heartbeat said it was leaving), which is no
// incident, so neither logged as one nor counted as lost. Its runs see
// it leave in their streams either way.
func (c *Coordinator) workerGone(id, reason string, lost bool) {
	if lost {
		c.cfg.Logger.Warn("worker lost", "worker", id, "reason", reason)
		c.cfg.Metrics.WorkerLost()
	} else {
		c.cfg.Logger.Info("worker left", "worker", id, "reason", reason)
		c.cfg.Metrics.WorkerLeft()
	}
	c.quotaWorkerLost(id)
	// The runs with a thread there see it in their own stream.
	c.publishToRuns(event.Event{Type: event.WorkerLost, Worker: id, Reason: reason}, func(rn *run) bool { return rn.onWorker(id) })
}

// publishToRuns publishes e, an event of the cluster, and a copy of it in
// the stream of each live run it concerns.
func (c *Coordinator) publishToRuns(e event.Event, concerns func(*run) bool) {
	c.publish(e)
	for _, rn := range c.liveRunList() {
		if concerns(rn) {
			e.RunID = rn.id
			c.publish(e)
		}
	}
}

// liveRunList is a snapshot of the runs this coordinator owns.
func (c *Coordinator) liveRunList() []*run {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Values(c.runs))
}
