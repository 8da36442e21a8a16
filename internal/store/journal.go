package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/wire"
)

// The journal stream: one subject per run, thread and writer.
//
//	formica.journal.<run>.<thread>.t   entries the thread wrote (its worker)
//	formica.journal.<run>.<thread>.c   entries the coordinator wrote
//
// The writer's token lets NATS permissions give workers the first and only
// coordinators the second; a thread's entries also carry their placement's
// proof (journal.Proof) in the Formica-Placement header, checked when read
// against the coordinators' published keys, and count on replay only under
// a placement a coordinator made (journal.Trusted). In journals written
// before proofs the header is the digest of the placement's token, and the
// coordinator journaled each placement on the thread's .c subject.
const (
	JournalStream = "FORMICA_JOURNAL"
	// SubjectJournalAll matches every journal entry.
	SubjectJournalAll = "formica.journal.>"
	// HeaderPlacement carries the writer's placement proof (or, before
	// proofs, the digest of its placement token).
	HeaderPlacement = "Formica-Placement"
	// DefaultJournalMaxAge is how long journals are kept by default.
	DefaultJournalMaxAge = 7 * 24 * time.Hour
	// JournalMaxMsgBytes bounds one journal message, headers included:
	// the stream refuses larger ones, and writers send an entry larger
	// than this (or than the NATS max payload) through the transfers
	// stream, by reference.
	JournalMaxMsgBytes = 1 << 20
	// DefaultJournalMaxThreadMsgs bounds the messages one thread's journal
	// subject holds (the thread's own, and apart the coordinator's for it):
	// past it the stream refuses the write (journal.ErrLimit) and keeps
	// what it has. A thread's turn costs a few messages (its model
	// response; its tool results, helpers that failed and approvals go out
	// as they come, each within JournalLinger of the last), so this is
	// thousands of turns.
	DefaultJournalMaxThreadMsgs = 10_000
)

// SubjectJournal is where the entries of one thread go; byCoordinator picks
// the coordinator's subject.
func SubjectJournal(run, thread string, byCoordinator bool) string {
	w := ".t"
	if byCoordinator {
		w = ".c"
	}
	return "formica.journal." + run + "." + thread + w
}

// journalAckTimeout bounds how long one journal write may wait for its ack.
const journalAckTimeout = 10 * time.Second

// journalMaxPending bounds the journal writes of one connection not yet
// acked: past it, a write waits (briefly) for acks, then fails.
const journalMaxPending = 4096

// journalPublisher is the JetStream context of the journal's pipelined
// writes: acks are awaited only where a writer syncs, and every write that
// fails, awaited or not, is logged and counted (Config.JournalFailed).
func (s *Store) journalPublisher(nc *nats.Conn) (jetstream.JetStream, error) {
	jjs, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(journalMaxPending),
		jetstream.WithPublishAsyncTimeout(journalAckTimeout),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, msg *nats.Msg, err error) { s.journalFailed(msg, err) }))
	if err != nil {
		return nil, fmt.Errorf("store: jetstream: %w", err)
	}
	return jjs, nil
}

// journalFailed reports a journal write that was not stored.
func (s *Store) journalFailed(msg *nats.Msg, err error) {
	run, thread := "", ""
	if msg != nil {
		if parts := strings.Split(msg.Subject, "."); len(parts) == 5 {
			run, thread = parts[2], parts[3]
		}
	}
	s.log.Warn("store: journal write failed", "run_id", run, "thread_id", thread, "err", err)
	if s.cfg.JournalFailed != nil {
		s.cfg.JournalFailed()
	}
}

// JournalLinger is how long a worker's batched writer holds an entry before
// it sends it on its own (Batched): what a thread appends is in its
// transcript at most this long after it happened, and entries appended
// within it cost one stored message together.
const JournalLinger = 200 * time.Millisecond

// journalStreamConfig is the journal stream of cfg. Writes past its limits
// are refused, never made room for: a worker's credentials may write any
// thread's journal subject (what counts is checked when read, see
// journal.Trusted), so what one thread's subject holds is bounded
// (JournalMaxThreadMsgs messages of at most JournalMaxMsgBytes), and
// nobody's writes can push a thread's own entries out.
func journalStreamConfig(cfg Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:                 JournalStream,
		Description:          "Formica thread journals",
		Subjects:             []string{SubjectJournalAll},
		Retention:            jetstream.LimitsPolicy,
		Discard:              jetstream.DiscardNew,
		DiscardNewPerSubject: true,
		MaxMsgsPerSubject:    int64(cfg.JournalMaxThreadMsgs),
		MaxMsgSize:           JournalMaxMsgBytes,
		MaxAge:               cfg.JournalMaxAge,
		Storage:              jetstream.FileStorage,
		Replicas:             cfg.Replicas,
		// Read by direct gets (ReadJournal).
		AllowDirect: true,
	}
}

// journalMaxValue bounds what a journal writer publishes as one message:
// a batch no larger, an entry larger goes by reference.
func (s *Store) journalMaxValue() int {
	return min(s.maxValue(), JournalMaxMsgBytes-16<<10)
}

// journalWriteError is err, a failed write of thread's journal in run,
// wrapped with journal.ErrLimit and the limit's name when the stream
// refused the write for one of its limits.
func journalWriteError(run, thread string, err error) error {
	var api *jetstream.APIError
	switch {
	case errors.As(err, &api) && strings.Contains(api.Description, "maximum messages per subject"):
		return fmt.Errorf("%w: thread %s of run %s has journaled the most messages a thread may "+
			"(stream %s, max messages per subject: coordinator --journal-max-thread-msgs): %w", journal.ErrLimit, thread, run, JournalStream, err)
	case errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum,
		errors.Is(err, nats.ErrMaxPayload):
		return fmt.Errorf("%w: a journal message of thread %s of run %s is larger than the journal takes "+
			"(%d bytes, or the NATS max payload): %w", journal.ErrLimit, thread, run, JournalMaxMsgBytes, err)
	}
	return fmt.Errorf("store: journal %s/%s: %w", run, thread, err)
}

// JournalWriter appends the entries of one thread, pipelined: Append
// publishes at once without waiting, Sync waits until every entry appended
// so far is stored. Batched, Append keeps entries until the next Flush or
// Sync, or for its linger at most, and sends them in one message. It is safe
// for concurrent use (parallel tool calls).
type JournalWriter struct {
	s       *Store
	run     string
	thread  string
	subject string
	// placement is the Formica-Placement header of every message.
	placement string
	batched   time.Duration // the linger of a batched writer; 0: not batched

	mu      sync.Mutex
	held    [][]byte    // encoded entries a batched writer holds until Sync
	linger  *time.Timer // sends what is held once JournalLinger is over
	pending []jetstream.PubAckFuture
	err     error
}

// Batched makes Append hold entries until the next Flush or Sync, or until
// linger (> 0; JournalLinger for a worker) has passed since the first of
// them, and then publishes them as one message: a thread's entries between
// two points where they must be stored cost one stored message, not one
// each, and none waits longer than linger to be seen. What a batched writer
// holds is lost with its process, as an entry not yet synced may be anyway.
func (w *JournalWriter) Batched(linger time.Duration) *JournalWriter {
	w.batched = max(linger, time.Millisecond)
	return w
}

// Journal returns the writer of thread's journal in run. placement is the
// token of the placement the writer holds (its digest goes with every
// entry); the coordinator passes byCoordinator and no token.
func (s *Store) Journal(run, thread, placement string, byCoordinator bool) *JournalWriter {
	return &JournalWriter{s: s, run: run, thread: thread, subject: SubjectJournal(run, thread, byCoordinator),
		placement: journal.Digest(placement)}
}

// Proven makes the writer journal proof (journal.Signer.Sign, of the
// placement whose token opened it) with every entry, in place of the
// token's bare digest: its entries then count on replay without an entry
// of the coordinator's for the placement. An empty proof (a coordinator
// that sends none) keeps the digest.
func (w *JournalWriter) Proven(proof string) *JournalWriter {
	if proof != "" {
		w.placement = proof
	}
	return w
}

// Append queues e. An entry larger than one NATS message is stored in the
// transfers stream first and journaled by reference.
func (w *JournalWriter) Append(e journal.Entry) {
	data, err := w.s.encodeEntry(e)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.setErr(fmt.Errorf("store: journal %s/%s: %w", w.run, w.thread, err))
		return
	}
	if w.batched > 0 {
		w.held = append(w.held, data)
		if len(w.held) == 1 {
			w.armLinger()
		}
		return
	}
	w.publish(data)
}

// armLinger starts the wait after which held entries are sent. w.mu is held.
func (w *JournalWriter) armLinger() {
	if w.linger == nil {
		w.linger = time.AfterFunc(w.batched, w.Flush)
		return
	}
	w.linger.Reset(w.batched)
}

// journalBatch is the body of a message holding several entries, each
// encoded as it would be alone (an entry or a reference).
type journalBatch struct {
	Entries [][]byte `msgpack:"e"`
}

// flush publishes the held entries: as few messages as hold them, each at
// most journalMaxValue bytes and maxBatch entries, in order. w.mu is held.
func (w *JournalWriter) flush() {
	held := w.held
	w.held = nil
	if len(held) > 0 && w.linger != nil {
		w.linger.Stop()
	}
	limit := w.s.journalMaxValue() - batchOverhead
	for len(held) > 0 {
		n, size := 0, 0
		for n < len(held) && n < maxBatch && (n == 0 || size+len(held[n])+entryOverhead <= limit) {
			size += len(held[n]) + entryOverhead
			n++
		}
		w.publishBatch(held[:n])
		held = held[n:]
	}
}

// The bytes a batch message adds to its entries: the envelope, and per
// entry its length.
const (
	batchOverhead = 64
	entryOverhead = 5
)

// publishBatch publishes entries as one message: the entry alone, or a
// batch of them. w.mu is held.
func (w *JournalWriter) publishBatch(entries [][]byte) {
	if len(entries) == 1 {
		w.publish(entries[0])
		return
	}
	data, err := wire.Encode(wire.TypeJournalBatch, journalBatch{Entries: entries})
	if err != nil {
		w.setErr(fmt.Errorf("store: journal %s/%s: %w", w.run, w.thread, err))
		return
	}
	w.publish(data)
}

// publish sends one message without waiting for its ack. w.mu is held.
func (w *JournalWriter) publish(data []byte) {
	f, err := w.s.publishEntry(w.subject, w.placement, data)
	if err != nil {
		w.setErr(journalWriteError(w.run, w.thread, err))
		return
	}
	w.pending = append(w.pending, f)
}

// encodeEntry encodes e for the journal, timed now if it is not: through
// the transfers stream, by reference, if it is larger than one NATS message.
func (s *Store) encodeEntry(e journal.Entry) ([]byte, error) {
	if e.Time.IsZero() {
		e.Time = s.cfg.Now()
	}
	data, err := wire.Encode(wire.TypeJournalEntry, &e) // by pointer: no copy of e to encode
	if err == nil && len(data) > s.journalMaxValue() {
		data, err = s.offloadEntry(e.Kind, data)
	}
	return data, err
}

// publishEntry sends one journal message to subject without waiting for its
// ack; placement is the writer's placement header, if any. A failure is
// reported (journalFailed) and returned.
func (s *Store) publishEntry(subject, placement string, data []byte) (jetstream.PubAckFuture, error) {
	// The subject names the run and the thread: only the placement goes
	// in a header.
	msg := &nats.Msg{Subject: subject, Data: data}
	if placement != "" {
		msg.Header = nats.Header{HeaderPlacement: []string{placement}}
	}
	f, err := s.jjs.PublishMsgAsync(msg, jetstream.WithExpectStream(JournalStream))
	if err != nil {
		s.journalFailed(msg, err)
	}
	return f, err
}

func (w *JournalWriter) setErr(err error) {
	if w.err == nil {
		w.err = err
	}
}

// Flush starts storing what a batched writer holds, without waiting.
func (w *JournalWriter) Flush() {
	w.mu.Lock()
	w.flush()
	w.mu.Unlock()
}

// Sync waits until every entry appended so far is stored, and returns the
// first error since the last Sync: one wrapping journal.ErrLimit if the
// stream refused any of them for its limits.
func (w *JournalWriter) Sync(ctx context.Context) error {
	w.mu.Lock()
	w.flush()
	pending, err := w.pending, w.err
	w.pending, w.err = nil, nil
	w.mu.Unlock()
	if len(pending) == 0 {
		return err
	}
	// Each write fails on its own once journalAckTimeout has passed without
	// its ack (the publisher's async timeout): the wait is bounded.
	for _, f := range pending {
		select {
		case <-f.Ok():
		case e := <-f.Err():
			// A refusal for a limit is the one to report: it is for good.
			if we := journalWriteError(w.run, w.thread, e); err == nil || errors.Is(we, journal.ErrLimit) && !errors.Is(err, journal.ErrLimit) {
				err = we
			}
		case <-ctx.Done():
			return errors.Join(err, fmt.Errorf("store: journal %s/%s: %w", w.run, w.thread, context.Cause(ctx)))
		}
	}
	return err
}

// journalRef is the body of an entry kept by reference.
type journalRef struct {
	Kind journal.Kind `msgpack:"k"`
	Ref  string       `msgpack:"ref"`
}

func (s *Store) offloadEntry(kind journal.Kind, data []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	ref, err := s.PutPayload(ctx, "", data)
	if err != nil {
		return nil, err
	}
	return wire.Encode(wire.TypeJournalRef, journalRef{Kind: kind, Ref: ref})
}

// journalMsg is a stored journal message.
type journalMsg interface {
	Subject() string
	Headers() nats.Header
	Data() []byte
}

// maxBatch bounds the entries one stored message may hold.
const maxBatch = 1024

// decodeEntries reads the entries of one stored message: one, or a batch
// (they share the message's sequence). One that does not decode is logged
// and skipped. An entry kept by reference is read only from place (see
// journalPayload).
func (s *Store) decodeEntries(ctx context.Context, msg journalMsg, place string) []journal.Entry {
	data := msg.Data()
	env, err := wire.Decode(data)
	if err != nil || env.Type != wire.TypeJournalBatch {
		if e, ok := s.decodeEntry(ctx, msg, data, place); ok {
			return []journal.Entry{e}
		}
		return nil
	}
	var b journalBatch
	if err := wire.DecodeAs(data, wire.TypeJournalBatch, &b); err != nil || len(b.Entries) > maxBatch {
		s.log.Warn("store: bad journal batch", "subject", msg.Subject(), "err", err, "entries", len(b.Entries))
		return nil
	}
	out := make([]journal.Entry, 0, len(b.Entries))
	for _, d := range b.Entries {
		if e, ok := s.decodeEntry(ctx, msg, d, place); ok {
			out = append(out, e)
		}
	}
	return out
}

// journalPayload reads the large entry ref names, written on subject,
// from place alone: a coordinator's entry (.c) from the coordinators'
// place, a thread's (.t) from the place of the worker its placement put it
// on (its proof names the worker); one written before the shared stream
// from that party's bucket of then. A read never deletes it: the entry is
// read again on every replay and transcript, until the stream's MaxAge.
func (s *Store) journalPayload(ctx context.Context, subject, ref, place string) ([]byte, error) {
	r, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	in := r.place == place
	if r.legacy != nil {
		in = r.legacy.bucket == legacyBucketOf(place)
	}
	if !in || strings.HasSuffix(subject, ".c") != (place == CoordinatorsPlace) {
		return nil, fmt.Errorf("%w: %s on %s", ErrForeignRef, ref, subject)
	}
	return s.readPayload(ctx, r)
}

// decodeEntry reads one entry of msg, encoded in data; one kept by
// reference is read from place.
func (s *Store) decodeEntry(ctx context.Context, msg journalMsg, data []byte, place string) (journal.Entry, bool) {
	var e journal.Entry
	if env, err := wire.Decode(data); err == nil && env.Type == wire.TypeJournalRef {
		var ref journalRef
		if err := wire.DecodeAs(data, wire.TypeJournalRef, &ref); err != nil {
			s.log.Warn("store: bad journal reference", "subject", msg.Subject(), "err", err)
			return e, false
		}
		if data, err = s.journalPayload(ctx, msg.Subject(), ref.Ref, place); err != nil {
			s.log.Warn("store: journal entry lost", "subject", msg.Subject(), "err", err)
			return e, false
		}
	}
	if err := wire.DecodeAs(data, wire.TypeJournalEntry, &e); err != nil {
		s.log.Warn("store: bad journal entry", "subject", msg.Subject(), "err", err)
		return e, false
	}
	e.ByCoordinator = strings.HasSuffix(msg.Subject(), ".c")
	if parts := strings.Split(msg.Subject(), "."); len(parts) == 5 {
		e.ThreadID = parts[3]
	}
	if h := msg.Headers(); h != nil {
		e.Placement = h.Get(HeaderPlacement)
	}
	return e, true
}
