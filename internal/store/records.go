package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
)

// UpdateAttempts bounds the compare-and-set attempts of one UpdateRecord.
const UpdateAttempts = 32

// pointer is what the runs bucket holds for a record too large for one
// message: the object in PayloadsBucket that holds its JSON. A record's
// own JSON always starts with {"run_id":, so the two never mix up.
type pointer struct {
	Ref string `json:"ref"`
}

var pointerPrefix = []byte(`{"ref":`)

// ListOptions selects records for ListPage.
type ListOptions struct {
	// Status, when set, keeps only records of that status.
	Status event.Status
	// Limit, when positive, keeps only the newest Limit records.
	Limit int
	// Page is the cursor of the page to read (ListPage's Next); "" is the
	// newest.
	Page string
}

// CreateRecord stores r under r.RunID if no record of that run exists
// (else ErrExists) and returns its revision.
//
// A created record is added to the run index, which is how ListPage finds
// it.
func (s *Store) CreateRecord(ctx context.Context, r record.Run) (uint64, error) {
	rev, err := s.writeRecord(ctx, r, func(ctx context.Context, val []byte) (uint64, error) {
		rev, err := s.runs.Create(ctx, r.RunID, val)
		if errors.Is(err, jetstream.ErrKeyExists) {
			err = fmt.Errorf("%w: record %s", ErrExists, r.RunID)
		}
		return rev, err
	})
	if err != nil {
		return rev, err
	}
	if err := s.index(ctx, r.RunID); err != nil {
		// The record stands; only listing misses it.
		s.log.Warn("store: run not indexed", "run", r.RunID, "err", err)
	}
	return rev, nil
}

// GetRecord returns the record of run id and its revision, or ErrNotFound.
func (s *Store) GetRecord(ctx context.Context, id string) (record.Run, uint64, error) {
	r, rev, _, err := s.getRecord(ctx, id)
	return r, rev, err
}

// getRecord also returns the object behind a large record ("" if none).
func (s *Store) getRecord(ctx context.Context, id string) (record.Run, uint64, string, error) {
	if err := checkID(id); err != nil {
		return record.Run{}, 0, "", err
	}
	// A reader can lose a race with an update that replaces a large record
	// and deletes its old object: read the key again then.
	for attempt := 0; ; attempt++ {
		e, err := s.runs.Get(ctx, id)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return record.Run{}, 0, "", fmt.Errorf("%w: record %s", ErrNotFound, id)
		}
		if err != nil {
			return record.Run{}, 0, "", fmt.Errorf("store: get record %s: %w", id, err)
		}
		r, err := s.decodeRecord(ctx, e.Value())
		if errors.Is(err, ErrNotFound) && attempt < 3 {
			continue
		}
		if err != nil {
			return record.Run{}, 0, "", fmt.Errorf("store: get record %s: %w", id, err)
		}
		return r, e.Revision(), refIn(e.Value()), nil
	}
}

// UpdateRecord applies fn to the current record of run id and stores the
// result if nobody changed the record meanwhile; otherwise it reads the
// record again and calls fn again, at most UpdateAttempts times (then
// ErrConflict). fn must be free of side effects beyond r. An error from fn
// aborts the update and is returned wrapped. The run id cannot change.
func (s *Store) UpdateRecord(ctx context.Context, id string, fn func(*record.Run) error) (record.Run, error) {
	wait := time.Millisecond
	for range UpdateAttempts {
		r, rev, old, err := s.getRecord(ctx, id)
		if err != nil {
			return record.Run{}, err
		}
		if err := fn(&r); err != nil {
			return record.Run{}, fmt.Errorf("store: update record %s: %w", id, err)
		}
		r.RunID = id
		_, err = s.writeRecord(ctx, r, func(ctx context.Context, val []byte) (uint64, error) {
			return s.runs.Update(ctx, id, val, rev)
		})
		if err == nil {
			s.dropObject(ctx, old)
			return r, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return record.Run{}, err
		}
		select {
		case <-ctx.Done():
			return record.Run{}, context.Cause(ctx)
		case <-time.After(wait + rand.N(wait)):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
	return record.Run{}, fmt.Errorf("%w: record %s after %d attempts", ErrConflict, id, UpdateAttempts)
}

// WatchRecord sends the current record of run id (once it exists), then
// every update, until ctx ends; then the channel is closed. The reader must
// keep reading or cancel ctx.
func (s *Store) WatchRecord(ctx context.Context, id string) (<-chan record.Run, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	return watch(ctx, s, RunsBucket, storedRuns, id, func(m *storedMsg) (record.Run, bool) {
		r, err := s.decodeRecord(ctx, m.data)
		if err != nil {
			// A large record replaced meanwhile: its successor follows.
			if !errors.Is(err, ErrNotFound) && ctx.Err() == nil {
				s.log.Warn("store: skipping unreadable record", "key", id, "err", err)
			}
			return r, false
		}
		return r, true
	})
}

// writeRecord encodes r, moving it to the object store when too large for
// one message, and stores it with op. A failed op deletes the new object.
func (s *Store) writeRecord(ctx context.Context, r record.Run, op func(context.Context, []byte) (uint64, error)) (uint64, error) {
	if err := checkID(r.RunID); err != nil {
		return 0, err
	}
	val, err := json.Marshal(r)
	if err != nil {
		return 0, fmt.Errorf("store: encode record %s: %w", r.RunID, err)
	}
	var ref string
	if len(val) > s.maxValue() {
		ref = "records/" + r.RunID + "/" + uuid.NewString()
		if _, err := s.payloads.PutBytes(ctx, ref, val); err != nil {
			return 0, fmt.Errorf("store: put large record %s: %w", r.RunID, err)
		}
		if val, err = json.Marshal(pointer{Ref: ref}); err != nil {
			return 0, err
		}
	}
	rev, err := op(ctx, val)
	if err != nil {
		s.dropObject(ctx, ref)
		if errors.Is(err, ErrExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return 0, err
		}
		return 0, fmt.Errorf("store: write record %s: %w", r.RunID, err)
	}
	return rev, nil
}

// decodeRecord reads a stored value, following a pointer; a pointer to a
// deleted object is ErrNotFound.
func (s *Store) decodeRecord(ctx context.Context, val []byte) (record.Run, error) {
	var r record.Run
	if ref := refIn(val); ref != "" {
		data, err := s.readObject(ctx, s.payloads, PayloadsBucket, ref)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return r, fmt.Errorf("%w: object %s", ErrNotFound, ref)
		}
		if err != nil {
			return r, fmt.Errorf("object %s: %w", ref, err)
		}
		val = data
	}
	err := json.Unmarshal(val, &r)
	return r, err
}

// refIn is the object a stored value points to, or "".
func refIn(val []byte) string {
	var p pointer
	if !bytes.HasPrefix(val, pointerPrefix) || json.Unmarshal(val, &p) != nil {
		return ""
	}
	return p.Ref
}

// dropObject deletes an object no value points to any more; a failure only
// leaves an orphan, so it is logged.
func (s *Store) dropObject(ctx context.Context, ref string) {
	if ref == "" {
		return
	}
	ctx, cancel := withTimeout(context.WithoutCancel(ctx))
	defer cancel()
	if err := s.payloads.Delete(ctx, ref); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		s.log.Warn("store: orphaned large record object", "ref", ref, "err", err)
	}
}
