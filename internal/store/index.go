package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
)

// The run index: one message per created record, on IndexStream, so the
// stream's own sequence orders runs by creation and a page of the newest
// runs reads that many messages from its end, never the whole bucket.
const (
	// IndexStream holds one message per run record created (LimitsPolicy,
	// MaxAge = Retention).
	IndexStream = "FORMICA_RUN_INDEX"
	// SubjectIndex is the one subject of IndexStream.
	SubjectIndex = "formica.index.runs"
)

// indexEntry is one message of the run index.
type indexEntry struct {
	RunID string `json:"run_id"`
}

// scanPerPage bounds the index entries one page reads when few match its
// status filter: the page then ends early, with a cursor to read on.
func scanPerPage(limit int) int { return 8*limit + 64 }

// Page is one page of ListPage: records newest first, and the cursor of
// the next page ("" when there is none).
type Page struct {
	Runs []record.Run
	Next string
}

// ErrBadCursor is a page cursor that ListPage did not hand out.
var ErrBadCursor = errors.New("store: bad page cursor")

// index records that run id was created.
func (s *Store) index(ctx context.Context, id string) error {
	data, _ := json.Marshal(indexEntry{RunID: id})
	if _, err := s.js.Publish(ctx, SubjectIndex, data); err != nil {
		return fmt.Errorf("store: index run %s: %w", id, err)
	}
	return nil
}

// ListPage returns up to opts.Limit records (default 50), newest first,
// after the cursor of an earlier page (opts.Page; "" starts at the newest).
// It reads the run index from its end: a page costs its own size, and a
// status filter that matches little reads at most scanPerPage entries
// before it returns what it found with the cursor to go on.
//
// The index is read in windows of entries, each window by one batched
// direct get, and the records a window names by one more (the last value
// of each key, multi_last); a record's status is read before the rest of
// it is decoded, so a filter that skips a record costs little. Whatever
// the number of stored runs, a page makes a few requests and holds one
// window's records at most.
func (s *Store) ListPage(ctx context.Context, opts ListOptions) (Page, error) {
	limit := opts.Limit
	if limit <= 0 {
		limit = 50
	}
	info, err := s.indexStream.Info(ctx)
	if err != nil {
		return Page{}, fmt.Errorf("store: list records: %w", err)
	}
	seq := info.State.LastSeq
	if opts.Page != "" {
		before, err := strconv.ParseUint(opts.Page, 10, 64)
		if err != nil || before == 0 {
			return Page{}, fmt.Errorf("%w: %q", ErrBadCursor, opts.Page)
		}
		seq = min(seq, before-1)
	}
	first := max(info.State.FirstSeq, 1)
	var page Page
	seen := map[string]bool{}
	for scanned := 0; seq >= first; {
		if len(page.Runs) == limit || scanned == scanPerPage(limit) {
			page.Next = strconv.FormatUint(seq+1, 10)
			break
		}
		// As many entries as the page lacks records; once some entries
		// did not match the filter, more by the share that did.
		need := limit - len(page.Runs)
		w := need
		if len(page.Runs) < scanned {
			w = need * scanned / max(len(page.Runs), 1)
			w += w/4 + 1
		}
		n := min(uint64(min(w, listWindow, scanPerPage(limit)-scanned)), seq-first+1)
		ids, err := s.indexWindow(ctx, seq-n+1, seq)
		if err != nil {
			return Page{}, fmt.Errorf("store: list records: %w", err)
		}
		var want []string
		for _, id := range ids {
			if id != "" && !seen[id] {
				want = append(want, id)
			}
		}
		recs, err := s.listed(ctx, want, opts.Status)
		if err != nil {
			return Page{}, fmt.Errorf("store: list records: %w", err)
		}
		// Newest first, each entry counted as scanned.
		for i := len(ids) - 1; i >= 0 && len(page.Runs) < limit && scanned < scanPerPage(limit); i-- {
			scanned++
			seq--
			id := ids[i]
			if id == "" || seen[id] {
				continue
			}
			seen[id] = true
			if r, ok := recs[id]; ok {
				page.Runs = append(page.Runs, r)
			}
		}
	}
	return page, nil
}

// listWindow bounds the index entries a page reads at once.
const listWindow = 256

// errEnough stops a direct read that has what it needs.
var errEnough = errors.New("store: read enough")

// indexWindow returns the run ids of the index entries from sequence from
// to to, in order, "" for an entry gone (past its age) or unreadable.
func (s *Store) indexWindow(ctx context.Context, from, to uint64) ([]string, error) {
	ids := make([]string, to-from+1)
	err := s.readDirect(ctx, IndexStream, SubjectIndex, from, int(to-from+1), func(m *storedMsg) error {
		if m.seq > to {
			return errEnough
		}
		var e indexEntry
		if json.Unmarshal(m.data, &e) == nil && checkID(e.RunID) == nil {
			ids[m.seq-from] = e.RunID
		}
		if m.seq == to {
			return errEnough
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return nil, err
	}
	return ids, nil
}

// listed reads the records of ids (each once) and returns those of status
// (any, when status is ""), by id. A record deleted, or past its
// retention, is not there.
func (s *Store) listed(ctx context.Context, ids []string, status event.Status) (map[string]record.Run, error) {
	out := make(map[string]record.Run, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = kvSubject(RunsBucket, id)
	}
	var again []string // records to read one by one
	err := s.readLast(ctx, kvStream(RunsBucket), keys, func(m *storedMsg) error {
		id := kvKey(RunsBucket, m)
		if deleted(m) {
			delete(out, id)
			return nil
		}
		if status != "" && refIn(m.data) == "" {
			// The status alone first: a record of another is not decoded.
			var peek struct {
				Status event.Status `json:"status"`
			}
			if json.Unmarshal(m.data, &peek) == nil && peek.Status != status {
				delete(out, id)
				return nil
			}
		}
		r, err := s.decodeRecord(ctx, m.data)
		if err != nil {
			// A large record replaced meanwhile: read it again alone.
			again = append(again, id)
			return nil
		}
		if status == "" || r.Status == status {
			out[id] = r
		} else {
			delete(out, id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, id := range again {
		r, _, err := s.GetRecord(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			s.log.Warn("store: skipping unreadable record", "run", id, "err", err)
			continue
		}
		if status == "" || r.Status == status {
			out[id] = r
		}
	}
	return out, nil
}

// Ping checks that the run store answers: one request, whatever the
// number of runs.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if _, err := s.runs.Status(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}
