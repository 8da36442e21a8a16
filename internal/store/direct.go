package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Every read a client makes, and every read of what others write (the
// journal, whose thread entries workers write; the object stores), is a
// direct get, never a consumer: a consumer delivers on whatever subject its
// creator names, so a reader that may create one could have the server
// republish what a worker wrote onto another worker's subject. readDirect
// asks for them in batches; follow adds what the streams republish.

// directBatch is how many messages one batched direct get asks for, and
// directBytes how many bytes: the server stops after the message that
// passes it, so a batch stays well under a subscription's pending limit
// (64 MiB) whatever its messages hold.
const (
	directBatch = 512
	directBytes = 8 << 20
)

// storedMsg is a message read back from a stream.
type storedMsg struct {
	subject string
	seq     uint64
	hdr     nats.Header
	data    []byte
}

func (m *storedMsg) Subject() string      { return m.subject }
func (m *storedMsg) Headers() nats.Header { return m.hdr }
func (m *storedMsg) Data() []byte         { return m.data }

// storedFrom reads the stream's headers of m, a direct get's answer or a
// republished copy: both name the stored subject and sequence.
func storedFrom(m *nats.Msg) (*storedMsg, error) {
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil || seq == 0 {
		return nil, errors.New("stored message without its sequence")
	}
	return &storedMsg{subject: m.Header.Get(jetstream.SubjectHeader), seq: seq, hdr: m.Header, data: m.Data}, nil
}

// errNoDirect reports a stream that does not answer direct gets.
var errNoDirect = errors.New("store: stream does not answer direct gets")

// readDirect calls each, in stream order, with every message of stream
// whose subject matches filter from sequence from on, read by direct gets
// of batch messages each (the server's batch, ended by its EOB status,
// until nothing is pending). It stops at each's first error and returns it
// as it is.
func (s *Store) readDirect(ctx context.Context, stream, filter string, from uint64, batch int, each func(*storedMsg) error) error {
	return s.directGets(ctx, stream, batch, max(from, 1), func(seq uint64) any {
		return struct {
			Seq      uint64 `json:"seq"`
			NextFor  string `json:"next_by_subj"`
			Batch    int    `json:"batch"`
			MaxBytes int    `json:"max_bytes"`
		}{seq, filter, batch, directBytes}
	}, each)
}

// directGets asks stream for batches of at most batch messages, the first
// from seq on (request is the body asking from a sequence), and calls each
// with every message, until nothing is left (see readBatch).
func (s *Store) directGets(ctx context.Context, stream string, batch int, seq uint64, request func(seq uint64) any, each func(*storedMsg) error) error {
	d, err := s.directInbox(batch)
	if err != nil {
		return fmt.Errorf("store: read %s: %w", stream, err)
	}
	defer d.sub.Unsubscribe()
	for {
		req, _ := json.Marshal(request(seq))
		if err := s.nc.PublishRequest("$JS.API.DIRECT.GET."+stream, d.inbox, req); err != nil {
			return fmt.Errorf("store: read %s: %w", stream, err)
		}
		next, done, err := d.readBatch(ctx, stream, each)
		if err != nil || done {
			return err
		}
		seq = next
	}
}

// directInbox is where the answers to one reader's batched direct gets
// come: a subscription whose buffer holds one batch and its end (the next
// batch is asked for once a batch has ended), not the connection's default
// 65,536 messages.
type directInbox struct {
	inbox string
	sub   *nats.Subscription
	ch    chan *nats.Msg
	gone  chan struct{} // closed when the subscription ends
}

func (s *Store) directInbox(batch int) (*directInbox, error) {
	d := &directInbox{inbox: s.nc.NewInbox(), ch: make(chan *nats.Msg, batch+2), gone: make(chan struct{})}
	sub, err := s.nc.ChanSubscribe(d.inbox, d.ch)
	if err != nil {
		return nil, err
	}
	// nats.go may call it more than once (an unsubscribe racing the
	// connection's drain): the first call closes gone.
	closeGone := sync.OnceFunc(func() { close(d.gone) })
	sub.SetClosedHandler(func(string) { closeGone() })
	if !sub.IsValid() { // closed before the handler was set
		return nil, nats.ErrConnectionClosed
	}
	d.sub = sub
	return d, nil
}

// next is the inbox's next message.
func (d *directInbox) next(ctx context.Context) (*nats.Msg, error) {
	select {
	case m := <-d.ch:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-d.gone:
		return nil, nats.ErrConnectionClosed
	}
}

// readLast calls each, in stream order, with the last message of each of
// subjects (literal ones, at most maxLastSubjects) in stream, read by
// batched direct gets (multi_last); a subject with no message has none.
func (s *Store) readLast(ctx context.Context, stream string, subjects []string, each func(*storedMsg) error) error {
	if len(subjects) > maxLastSubjects {
		return fmt.Errorf("store: read %s: %d subjects at once, past %d", stream, len(subjects), maxLastSubjects)
	}
	// A batch cut by its bytes goes on from the sequence its end names.
	return s.directGets(ctx, stream, len(subjects), 0, func(seq uint64) any {
		return struct {
			Seq      uint64   `json:"seq,omitempty"`
			Last     []string `json:"multi_last"`
			Batch    int      `json:"batch"`
			MaxBytes int      `json:"max_bytes"`
		}{seq, subjects, len(subjects), directBytes}
	}, each)
}

// maxLastSubjects bounds the subjects of one multi_last direct get (the
// server's own bound).
const maxLastSubjects = 1024

// readBatch takes one batch's replies: messages, then the EOB status. It
// returns where the next batch starts, or done when nothing is left.
func (d *directInbox) readBatch(ctx context.Context, stream string, each func(*storedMsg) error) (next uint64, done bool, err error) {
	fail := func(err error) (uint64, bool, error) { return 0, false, fmt.Errorf("store: read %s: %w", stream, err) }
	for {
		m, err := d.next(ctx)
		if err != nil {
			return fail(err)
		}
		switch status := m.Header.Get("Status"); status {
		case "":
			sm, err := storedFrom(m)
			if err != nil {
				return fail(fmt.Errorf("direct get: %w", err))
			}
			if err := each(sm); err != nil {
				return 0, false, err
			}
		case "204": // EOB
			pending, perr := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			last, lerr := strconv.ParseUint(m.Header.Get(jetstream.LastSequenceHeader), 10, 64)
			if perr != nil || lerr != nil {
				return fail(errors.New("direct get: end of batch without its counts"))
			}
			return last + 1, pending == 0, nil
		case "404": // nothing (more) matches
			return 0, true, nil
		case "503":
			return fail(errNoDirect)
		default:
			return fail(fmt.Errorf("direct get: status %s %s", status, m.Header.Get("Description")))
		}
	}
}
