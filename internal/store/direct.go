package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
)

// Streams others write (the journal, whose thread entries workers write;
// the object stores) are read by direct gets alone, never through a
// consumer: a consumer delivers on whatever subject its creator names, so a
// reader that may create one could have the server republish what a worker
// wrote onto another worker's subject. readDirect asks for them in batches.

// directBatch is how many messages one batched direct get asks for.
const directBatch = 512

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

// errNoDirect reports a stream that does not answer direct gets.
var errNoDirect = errors.New("store: stream does not answer direct gets")

// readDirect calls each, in stream order, with every message of stream
// whose subject matches filter, read by direct gets of batch messages each
// (the server's batch, ended by its EOB status, until nothing is pending).
func (s *Store) readDirect(ctx context.Context, stream, filter string, batch int, each func(*storedMsg)) error {
	inbox := s.nc.NewInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return fmt.Errorf("store: read %s: %w", stream, err)
	}
	defer sub.Unsubscribe()
	seq := uint64(1)
	for {
		req, _ := json.Marshal(struct {
			Seq     uint64 `json:"seq"`
			NextFor string `json:"next_by_subj"`
			Batch   int    `json:"batch"`
		}{seq, filter, batch})
		if err := s.nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
			return fmt.Errorf("store: read %s: %w", stream, err)
		}
		next, done, err := readBatch(ctx, sub, each)
		if err != nil {
			return fmt.Errorf("store: read %s: %w", stream, err)
		}
		if done {
			return nil
		}
		seq = next
	}
}

// readBatch takes one batch's replies: messages, then the EOB status. It
// returns where the next batch starts, or done when nothing is left.
func readBatch(ctx context.Context, sub *nats.Subscription, each func(*storedMsg)) (next uint64, done bool, err error) {
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return 0, false, err
		}
		switch status := m.Header.Get("Status"); status {
		case "":
			seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
			if err != nil {
				return 0, false, fmt.Errorf("direct get: message without its sequence")
			}
			each(&storedMsg{subject: m.Header.Get("Nats-Subject"), seq: seq, hdr: m.Header, data: m.Data})
		case "204": // EOB
			pending, perr := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			last, lerr := strconv.ParseUint(m.Header.Get("Nats-Last-Sequence"), 10, 64)
			if perr != nil || lerr != nil {
				return 0, false, fmt.Errorf("direct get: end of batch without its counts")
			}
			return last + 1, pending == 0, nil
		case "404": // nothing (more) matches
			return 0, true, nil
		case "503":
			return 0, false, errNoDirect
		default:
			return 0, false, fmt.Errorf("direct get: status %s %s", status, m.Header.Get("Description"))
		}
	}
}
