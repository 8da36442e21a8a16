package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// keepStoredJournals makes sure that updating the journal stream to sc
// drops nothing stored: the server trims every subject past a per-subject
// limit that is set or lowered, oldest first, whatever the discard policy.
// So when sc would lower the limit of an existing stream (one from before
// the limit, or a smaller --journal-max-thread-msgs), the limit goes down
// only as far as the fullest thread's journal allows, and is logged; it
// reaches sc's once those journals expire (--journal-max-age), at a later
// Open. A stream already at sc's limit, or above it with no journal that
// full, costs one stream info.
func (s *Store) keepStoredJournals(ctx context.Context, sc *jetstream.StreamConfig) error {
	st, err := s.js.Stream(ctx, JournalStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	cur := st.CachedInfo().Config.MaxMsgsPerSubject
	if cur > 0 && cur <= sc.MaxMsgsPerSubject {
		return nil
	}
	// Counting reads the stream's subjects page by page, which may take
	// longer than one attempt of a request (a lost one, while a cluster
	// forms, must not hold a start for long).
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), journalCountTimeout)
	defer cancel()
	fullest, subject, err := s.fullestJournal(cctx)
	if err != nil {
		return fmt.Errorf("store: journal stream: count each thread's messages: %w", err)
	}
	if fullest > uint64(sc.MaxMsgsPerSubject) {
		s.log.Warn("store: a stored journal holds more messages than the journal's per-thread limit: "+
			"the limit stays above it until that journal expires, so nothing stored is dropped",
			"subject", subject, "messages", fullest, "limit", sc.MaxMsgsPerSubject, "kept_at", fullest)
		sc.MaxMsgsPerSubject = int64(fullest)
	}
	return nil
}

// journalCountTimeout bounds the count of each thread's journal messages
// before the per-thread limit is lowered.
const journalCountTimeout = time.Minute

// fullestJournal returns the most messages any one journal subject holds,
// and that subject, reading the stream's subject counts page by page.
func (s *Store) fullestJournal(ctx context.Context) (uint64, string, error) {
	var most uint64
	var subject string
	for offset := 0; ; {
		req, _ := json.Marshal(struct {
			Filter string `json:"subjects_filter"`
			Offset int    `json:"offset,omitempty"`
		}{SubjectJournalAll, offset})
		msg, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.INFO."+JournalStream, req)
		if err != nil {
			return 0, "", err
		}
		var resp struct {
			Error *jetstream.APIError `json:"error"`
			State struct {
				Subjects map[string]uint64 `json:"subjects"`
			} `json:"state"`
			Total int `json:"total"`
		}
		if err := json.Unmarshal(msg.Data, &resp); err != nil {
			return 0, "", err
		}
		if resp.Error != nil {
			return 0, "", resp.Error
		}
		for subj, n := range resp.State.Subjects {
			if n > most {
				most, subject = n, subj
			}
		}
		offset += len(resp.State.Subjects)
		if len(resp.State.Subjects) == 0 || offset >= resp.Total {
			return most, subject, nil
		}
	}
}
