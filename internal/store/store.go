// Package store keeps all of Formica's durable state in NATS JetStream:
//
//   - submissions: a work-queue stream (FORMICA_QUEUE on formica.queue.runs),
//     deduplicated by run id, with one durable pull consumer "coordinators"
//     that every coordinator shares. A submission is acked only when its run
//     has finished and its record is stored; while the run goes on, its
//     coordinator keeps the message in progress (KeepInProgress). A dead
//     coordinator's submissions come back after AckWait with a higher
//     delivery count.
//   - run records: the KV bucket formica_runs, JSON of record.Run keyed by
//     run id, updated by compare-and-set. A record too large for one NATS
//     message lives in the object store and the bucket holds a pointer.
//   - events: the limits stream FORMICA_EVENTS on formica.eventlog.>, each
//     run's events in batches, in order, as its coordinator stores them
//     (AppendEvents; it publishes each one live on formica.events.> too);
//     Events replays a run's events and follows it live. The stream
//     republishes each batch on formica.stored.events.<run>, as the
//     records and approvals buckets do each write on
//     formica.stored.runs.<run> and formica.stored.approvals.<id>: readers
//     follow them there, with no consumer (see follower).
//   - thread journals: the limits stream FORMICA_JOURNAL on
//     formica.journal.<run>.<thread>.{t,c}, every thread's life entry by
//     entry (see JournalWriter, ReadJournal and package journal).
//   - approvals held for a person: the KV bucket formica_approvals.
//   - large records: the object store formica_payloads.
//   - message bodies over the NATS max payload: the stream
//     FORMICA_TRANSFERS, every party's on subjects of its own (see
//     PutPayload).
//   - the run index: the stream FORMICA_RUN_INDEX, one message per created
//     record, which ListPage reads from its end.
//   - cancel requests: the stream FORMICA_CANCELS, a client's last request
//     to cancel each run, kept until a coordinator honours it (clients
//     write no records; see RequestCancel).
//   - webhook calls still to make: the work-queue stream FORMICA_WEBHOOKS,
//     with one durable pull consumer "webhooks" that every coordinator
//     shares (see PutWebhook).
//
// Records, approvals, payload objects and index entries are kept for
// Config.Retention after their last write, events for EventsMaxAge,
// journals for JournalMaxAge (at most Retention).
//
// Open creates or updates all of it, idempotently; several coordinators may
// open the same store at once. The Store does not own the NATS connection.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/ids"
)

// Names of the JetStream assets.
const (
	// QueueStream holds submissions (WorkQueuePolicy).
	QueueStream = "FORMICA_QUEUE"
	// SubjectQueue is the one subject of QueueStream.
	SubjectQueue = "formica.queue.runs"
	// QueueConsumer is the durable pull consumer all coordinators share.
	QueueConsumer = "coordinators"
	// EventsStream keeps every run's events (LimitsPolicy, MaxAge), in
	// batches (see AppendEvents).
	EventsStream = "FORMICA_EVENTS"
	// RunsBucket is the KV bucket of run records.
	RunsBucket = "formica_runs"
	// ApprovalsBucket is the KV bucket of approvals held for a person.
	ApprovalsBucket = "formica_approvals"
	// PayloadsBucket is the object store of large run records.
	PayloadsBucket = "formica_payloads"
)

// Defaults for the zero Config fields.
const (
	DefaultReplicas        = 1
	DefaultEventsMaxAge    = 7 * 24 * time.Hour
	DefaultDuplicateWindow = 24 * time.Hour
	DefaultAckWait         = 30 * time.Second
	DefaultMaxDeliver      = 10
	// DefaultMaxRunSlots is far above what one coordinator holds (its
	// --max-runs and --max-idle-runs, 8 + 32 by default), so the runs one
	// coordinator holds while they wait do not keep the queue from
	// delivering to the others.
	DefaultMaxRunSlots = 1024
	DefaultRetention   = 30 * 24 * time.Hour
)

// Config configures a Store. The zero value is a single-node store with the
// defaults above.
type Config struct {
	// Replicas of every stream, bucket and consumer: 1 (the default) for a
	// single server, 3 for a clustered NATS. At most 5.
	Replicas int
	// EventsMaxAge is how long events are kept; default 7 days.
	EventsMaxAge time.Duration
	// Retention is how long run records, held approvals and payload
	// objects are kept after their last write, and runs stay in the run
	// index; default 30 days. JetStream expires them (the buckets' TTL, the
	// index's and the transfers stream's MaxAge), so a large record's
	// object and an offloaded payload nobody fetched go too.
	Retention time.Duration
	// JournalMaxAge is how long thread journals are kept; default 7 days,
	// or Retention if that is shorter, and never longer than Retention: a
	// journal's large entries are bodies in the transfers stream, kept for
	// Retention, and a run is resumed (and its transcripts read) only
	// while its record is kept.
	JournalMaxAge time.Duration
	// JournalMaxThreadMsgs is the most messages one thread's journal
	// subject may hold (the thread's own entries, and apart the
	// coordinator's for it); default DefaultJournalMaxThreadMsgs. Writes
	// past it are refused (journal.ErrLimit): the thread fails, and no
	// entry it or anyone stored before is dropped. Open lowers it on an
	// existing stream only as far as the fullest thread's journal allows.
	JournalMaxThreadMsgs int
	// DuplicateWindow is how long a run id is remembered to drop a second
	// submission of the same run; default 24 h.
	DuplicateWindow time.Duration
	// AckWait is how long a coordinator may hold a submission without acking
	// or reporting progress before it is delivered again; default 30 s.
	// KeepInProgress reports progress every AckWait/3.
	AckWait time.Duration
	// MaxDeliver bounds deliveries of one submission; default 10. A message
	// at its last delivery (Submission.LastDelivery) must be settled, or it
	// stays in the queue, undelivered, for good.
	MaxDeliver int
	// MaxRunSlots bounds the submissions held unacked across all
	// coordinators (the consumer's MaxAckPending); default 1024. Each
	// coordinator pulls one submission per free run slot anyway.
	MaxRunSlots int
	// Logger receives warnings (undecodable messages, failed progress
	// reports, orphaned objects); nil discards them.
	Logger *slog.Logger
	// Now is the clock for record and approval times; nil means time.Now.
	Now func() time.Time
	// JournalFailed, when set, is told of each journal write that failed
	// (no ack in time, or refused): the work goes on, and the entry's step
	// is at-least-once. Failures are logged either way.
	JournalFailed func()
	// Client opens the store for a client of the cluster (the CLI, a
	// worker): streams and buckets that exist are used as they are, so a
	// client never overrides the settings (AckWait, Replicas, ...) of the
	// coordinators that own them; missing ones are created from this
	// Config, for a coordinator's Open to update later. A client store has
	// no queue consumer: Next fails with ErrClient.
	Client bool
}

func (c *Config) setDefaults() error {
	switch {
	case c.Replicas < 0 || c.Replicas > 5:
		return fmt.Errorf("%w: Replicas %d, want 1 to 5", ErrInvalidConfig, c.Replicas)
	case c.EventsMaxAge < 0, c.JournalMaxAge < 0, c.DuplicateWindow < 0, c.AckWait < 0, c.Retention < 0:
		return fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	case c.MaxDeliver < 0 || c.MaxRunSlots < 0 || c.JournalMaxThreadMsgs < 0:
		return fmt.Errorf("%w: negative MaxDeliver, MaxRunSlots or JournalMaxThreadMsgs", ErrInvalidConfig)
	case c.AckWait != 0 && c.AckWait < 100*time.Millisecond:
		return fmt.Errorf("%w: AckWait %s is below 100ms", ErrInvalidConfig, c.AckWait)
	}
	setDefault(&c.Replicas, DefaultReplicas)
	setDefault(&c.EventsMaxAge, DefaultEventsMaxAge)
	setDefault(&c.Retention, DefaultRetention)
	setDefault(&c.JournalMaxAge, min(DefaultJournalMaxAge, c.Retention))
	if c.JournalMaxAge > c.Retention {
		return fmt.Errorf("%w: JournalMaxAge %s is past Retention %s", ErrInvalidConfig, c.JournalMaxAge, c.Retention)
	}
	setDefault(&c.JournalMaxThreadMsgs, DefaultJournalMaxThreadMsgs)
	setDefault(&c.DuplicateWindow, DefaultDuplicateWindow)
	setDefault(&c.AckWait, DefaultAckWait)
	setDefault(&c.MaxDeliver, DefaultMaxDeliver)
	setDefault(&c.MaxRunSlots, DefaultMaxRunSlots)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Store is Formica's durable state. It is safe for concurrent use.
type Store struct {
	nc        *nats.Conn
	js        jetstream.JetStream
	jjs       jetstream.JetStream // the journal's pipelined writes
	ejs       jetstream.JetStream // event batches (AppendEvents); nil for a client
	cfg       Config
	log       *slog.Logger
	queue     jetstream.Consumer
	runs      jetstream.KeyValue
	approvals jetstream.KeyValue
	payloads  jetstream.ObjectStore
	// leases are the coordinators' holds on running runs (see HoldLease);
	// nil for a client.
	leases jetstream.KeyValue
	// place is where this store writes bodies sent by reference: the
	// coordinators' (Open), a worker's (OpenTransfers), none for a client.
	place string
	// transfers is TransfersStream, whose bodies a coordinator deletes;
	// nil for a worker.
	transfers jetstream.Stream
	// indexStream is the run index (see ListPage).
	indexStream jetstream.Stream
	// cancels holds clients' cancel requests (see RequestCancel).
	cancels jetstream.Stream
	// webhooks is the coordinators' consumer of the webhook calls to make
	// (see PutWebhook); nil for a client.
	webhooks jetstream.Consumer
	// pkeys are the coordinators' placement keys (see PublishPlacementKey).
	pkeys placementKeys
}

// Open creates or updates every stream, bucket and consumer of the store,
// idempotently, and returns a Store over them (with Config.Client, it
// creates only what is missing and changes nothing). Several processes may
// Open at once. On a cluster still placing peers ("no suitable peers", no meta
// leader yet) each step is retried until ctx ends, so give ctx a deadline.
func Open(ctx context.Context, nc *nats.Conn, cfg Config) (*Store, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: nil connection", ErrInvalidConfig)
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("store: jetstream: %w", err)
	}
	s := &Store{nc: nc, js: js, cfg: cfg, log: cfg.Logger}
	if s.jjs, err = s.journalPublisher(nc); err != nil {
		return nil, err
	}
	if !cfg.Client {
		if s.ejs, err = s.eventLogPublisher(nc); err != nil {
			return nil, err
		}
	}
	r := cfg.Replicas
	streams := []jetstream.StreamConfig{{
		Name:        QueueStream,
		Description: "Formica run submissions",
		Subjects:    []string{SubjectQueue},
		Retention:   jetstream.WorkQueuePolicy,
		Duplicates:  cfg.DuplicateWindow,
		Storage:     jetstream.FileStorage,
		Replicas:    r,
	}, {
		Name:        EventsStream,
		Description: "Formica run events, each run's in batches",
		Subjects:    []string{SubjectEventLogAll},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      cfg.EventsMaxAge,
		// Only coordinators write it, in batches of at most MaxEventBatch
		// (an event's texts clipped); a larger message is refused.
		MaxMsgSize: EventsMaxMsgBytes,
		Storage:    jetstream.FileStorage,
		Replicas:   r,
		// Followed without a consumer (Events).
		AllowDirect: true,
		RePublish:   republish(SubjectEventLogAll, storedEvents),
	}, {
		Name:        IndexStream,
		Description: "Formica runs in the order they were created",
		Subjects:    []string{SubjectIndex},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      cfg.Retention,
		AllowDirect: true,
		Storage:     jetstream.FileStorage,
		Replicas:    r,
	}, journalStreamConfig(cfg), cancelsStreamConfig(cfg), transfersStreamConfig(cfg)}
	if !cfg.Client {
		// Only coordinators make webhook calls, and read what they keep.
		streams = append(streams, webhooksStreamConfig(cfg))
	}
	// Every stream and bucket at once: on a cluster each one's creation
	// waits for its own Raft group to elect a leader, seconds each, which
	// one after another added up to about a minute.
	opens := make([]func() error, 0, len(streams)+6)
	var duplicates time.Duration
	for _, sc := range streams {
		opens = append(opens, func() error {
			st, err := s.openStream(ctx, sc)
			if err != nil {
				return err
			}
			switch sc.Name {
			case QueueStream:
				duplicates = st.CachedInfo().Config.Duplicates
				if !cfg.Client {
					return s.openQueueConsumer(ctx)
				}
			case IndexStream:
				s.indexStream = st
			case CancelsStream:
				s.cancels = st
			case TransfersStream:
				s.transfers = st
			case WebhooksStream:
				return s.openWebhooksConsumer(ctx)
			}
			return nil
		})
	}
	opens = append(opens, s.bucketOpeners(ctx)...)
	if err := all(opens); err != nil {
		return nil, err
	}
	s.cfg.DuplicateWindow = duplicates // what Enqueue relies on
	if !cfg.Client {
		s.place = CoordinatorsPlace
	}
	return s, nil
}

// all runs each of fns at once and returns their errors, joined.
func all(fns []func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, f := range fns {
		wg.Go(func() { errs[i] = f() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// openStream creates or updates (a client: looks up, or creates) stream
// sc, retrying while JetStream settles.
func (s *Store) openStream(ctx context.Context, sc jetstream.StreamConfig) (jetstream.Stream, error) {
	js := s.js
	if sc.Name == JournalStream && !s.cfg.Client {
		// Before its per-thread limit is lowered, what each thread holds
		// is counted (keepStoredJournals), once.
		if err := retry(ctx, s.log, "journal limits", func(ctx context.Context) error { return s.keepStoredJournals(ctx, &sc) }); err != nil {
			return nil, err
		}
	}
	return ensure(ctx, s, "stream ", js.Stream, sc.Name, jetstream.ErrStreamNotFound,
		func(ctx context.Context) (jetstream.Stream, error) { return js.CreateStream(ctx, sc) },
		func(ctx context.Context) (jetstream.Stream, error) { return js.CreateOrUpdateStream(ctx, sc) })
}

// openQueueConsumer creates or updates the coordinators' durable consumer
// of the queue.
func (s *Store) openQueueConsumer(ctx context.Context) (err error) {
	s.queue, err = s.openConsumer(ctx, QueueStream, jetstream.ConsumerConfig{
		Durable:       QueueConsumer,
		Description:   "Formica coordinators",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.cfg.AckWait,
		MaxDeliver:    s.cfg.MaxDeliver,
		MaxAckPending: s.cfg.MaxRunSlots,
	})
	return err
}

// openConsumer creates or updates the durable consumer cc of stream,
// retrying while JetStream settles.
func (s *Store) openConsumer(ctx context.Context, stream string, cc jetstream.ConsumerConfig) (c jetstream.Consumer, err error) {
	err = retry(ctx, s.log, "consumer "+cc.Durable, func(ctx context.Context) (err error) {
		c, err = s.js.CreateOrUpdateConsumer(ctx, stream, cc)
		return err
	})
	return c, err
}

// bucketOpeners returns the openers of the KV buckets and the object
// store: each creates or updates its bucket (a client: looks it up, or
// creates it).
func (s *Store) bucketOpeners(ctx context.Context) []func() error {
	js, r, client := s.js, s.cfg.Replicas, s.cfg.Client
	// The records and approvals buckets republish each write into a tree
	// of their own (see watch).
	kv := func(name, desc, tree string) jetstream.KeyValueConfig {
		return jetstream.KeyValueConfig{Bucket: name, Description: desc, History: 1, TTL: s.cfg.Retention,
			Storage: jetstream.FileStorage, Replicas: r, RePublish: republish(kvSubject(name, ">"), tree)}
	}
	type bucket struct {
		dst *jetstream.KeyValue
		kc  jetstream.KeyValueConfig
	}
	buckets := []bucket{{&s.runs, kv(RunsBucket, "Formica run records", storedRuns)},
		{&s.approvals, kv(ApprovalsBucket, "Formica approvals", storedApprovals)}}
	if !client {
		buckets = append(buckets, bucket{&s.leases, leasesConfig(s.cfg)}, bucket{&s.pkeys.kv, keysConfig(s.cfg)})
	}
	var opens []func() error
	for _, b := range buckets {
		opens = append(opens, func() (err error) {
			*b.dst, err = ensure(ctx, s, "bucket ", js.KeyValue, b.kc.Bucket, jetstream.ErrBucketNotFound,
				func(ctx context.Context) (jetstream.KeyValue, error) { return js.CreateKeyValue(ctx, b.kc) },
				func(ctx context.Context) (jetstream.KeyValue, error) { return js.CreateOrUpdateKeyValue(ctx, b.kc) })
			return err
		})
	}
	oc := jetstream.ObjectStoreConfig{Bucket: PayloadsBucket, Description: "Formica large run records", TTL: s.cfg.Retention,
		Storage: jetstream.FileStorage, Replicas: r}
	opens = append(opens, func() (err error) {
		s.payloads, err = ensure(ctx, s, "object store ", js.ObjectStore, PayloadsBucket, jetstream.ErrBucketNotFound,
			func(ctx context.Context) (jetstream.ObjectStore, error) { return js.CreateObjectStore(ctx, oc) },
			func(ctx context.Context) (jetstream.ObjectStore, error) { return js.CreateOrUpdateObjectStore(ctx, oc) })
		return err
	})
	return opens
}

// OpenTransfers returns worker's store of transfers: it writes bodies
// over the NATS max payload into the worker's place (WorkerPlace) of
// TransfersStream and reads them there (the coordinators write there what
// they send it), what a worker, whose credentials allow no other
// JetStream use, needs. It also writes its threads' journals (Journal),
// publishing to their subjects. Of cfg it uses Logger and JournalFailed.
// It asks the server nothing: a worker may start before any coordinator
// made the stream (an orchestrator gives no start order), and its bodies
// go through once one has.
func OpenTransfers(ctx context.Context, nc *nats.Conn, worker string, cfg Config) (*Store, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("store: jetstream: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := ids.CheckToken(worker); err != nil {
		return nil, fmt.Errorf("store: transfers of worker: %w", err)
	}
	s := &Store{nc: nc, js: js, log: log, place: WorkerPlace(worker),
		cfg: Config{Now: time.Now, Logger: log, JournalFailed: cfg.JournalFailed}}
	if s.jjs, err = s.journalPublisher(nc); err != nil {
		return nil, err
	}
	return s, nil
}

// ensure returns the asset called name (kind, such as "bucket ", names
// it in errors), retrying while JetStream settles: for a client, the
// existing one as it is (get), or else a new one (create); otherwise
// createOrUpdate's. A client that loses the race to create it finds it on
// the next attempt.
func ensure[T any](ctx context.Context, s *Store, kind string, get func(context.Context, string) (T, error), name string, notFound error,
	create, createOrUpdate func(context.Context) (T, error)) (v T, err error) {
	err = retry(ctx, s.log, kind+name, func(ctx context.Context) (err error) {
		if !s.cfg.Client {
			v, err = createOrUpdate(ctx)
			return err
		}
		if v, err = get(ctx, name); !errors.Is(err, notFound) {
			return err
		}
		v, err = create(ctx)
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			v, err = get(ctx, name)
		}
		return err
	})
	return v, err
}

// JetStream codes worth another attempt while a cluster settles.
const (
	codeNoSuitablePeers   = 10005 // placement before the meta leader sees every peer
	codeClusterNotAvail   = 10008 // JetStream system temporarily unavailable
	codeClusterNotLeader  = 10009
	codeStreamUpdateRaced = 10058 // name in use: a peer created it with a different config meanwhile
	codeNoJetStreamForAcc = 10039 // a 503 that waiting will not fix
)

// defaultAttempt bounds one attempt of retry.
const defaultAttempt = 5 * time.Second

// retry runs f with a bounded attempt timeout until it succeeds, fails for
// good, or ctx ends.
func retry(ctx context.Context, log *slog.Logger, what string, f func(context.Context) error) error {
	wait := 50 * time.Millisecond
	for {
		attempt, cancel := context.WithTimeout(ctx, defaultAttempt)
		err := f(attempt)
		cancel()
		if err == nil {
			return nil
		}
		if !transient(err) || ctx.Err() != nil {
			return fmt.Errorf("store: create %s: %w", what, err)
		}
		log.Info("store: JetStream not ready, retrying", "what", what, "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return fmt.Errorf("store: create %s: %w (last error: %w)", what, context.Cause(ctx), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

func transient(err error) bool {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode {
		case codeNoJetStreamForAcc:
			return false
		case codeNoSuitablePeers, codeClusterNotAvail, codeClusterNotLeader, codeStreamUpdateRaced:
			return true
		}
		return api.Code == 503
	}
	return errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled)
}

// checkID applies the one id rule (package ids): a valid id is a KV key and
// one subject token (run ids go into event subjects).
func checkID(id string) error { return ids.Check(id) }

// withTimeout bounds a ctx without deadline by the JetStream API default.
func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, apiTimeout)
}

// apiTimeout bounds a JetStream request whose ctx has no deadline, as the
// jetstream package does for its own calls.
const apiTimeout = 5 * time.Second
