package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

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
	var page Page
	seen := map[string]bool{}
	for scanned := 0; seq >= info.State.FirstSeq && seq > 0; seq-- {
		if len(page.Runs) == limit || scanned == scanPerPage(limit) {
			page.Next = strconv.FormatUint(seq+1, 10)
			break
		}
		scanned++
		m, err := s.indexStream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return Page{}, fmt.Errorf("store: list records: %w", err)
		}
		var e indexEntry
		if json.Unmarshal(m.Data, &e) != nil || seen[e.RunID] || checkID(e.RunID) != nil {
			continue
		}
		seen[e.RunID] = true
		r, _, err := s.GetRecord(ctx, e.RunID)
		if errors.Is(err, ErrNotFound) { // deleted, or past its retention
			continue
		}
		if err != nil {
			s.log.Warn("store: skipping unreadable record", "run", e.RunID, "err", err)
			continue
		}
		if opts.Status == "" || r.Status == opts.Status {
			page.Runs = append(page.Runs, r)
		}
	}
	return page, nil
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
