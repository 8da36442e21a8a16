package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Decisions on an approval.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
)

// Approval is a tool call held for a person to allow or deny. The
// coordinator that owns the run puts it and watches for the decision,
// which may be made through any coordinator's HTTP API or the CLI.
type Approval struct {
	ID         string `json:"id"`
	RunID      string `json:"run_id"`
	ThreadID   string `json:"thread_id"`
	ThreadPath string `json:"thread_path"`
	Tool       string `json:"tool"`
	// Arguments are the tool call's exact arguments (JSON text).
	Arguments string `json:"arguments"`
	// InDoubt asks whether to run again a call that a failure cut before
	// its result (harness.in_doubt ask): it may or may not have taken
	// effect.
	InDoubt bool `json:"in_doubt,omitempty"`
	// Coordinator owns the run and waits for the decision.
	Coordinator string    `json:"coordinator"`
	RequestedAt time.Time `json:"requested_at"`
	// Decision is "" while pending, then DecisionAllow or DecisionDeny.
	Decision  string    `json:"decision,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
}

// Pending reports whether nobody has decided a yet.
func (a Approval) Pending() bool { return a.Decision == "" }

// PutApproval stores a unconditionally (a new request, or a replacement).
func (s *Store) PutApproval(ctx context.Context, a Approval) error {
	if err := checkID(a.ID); err != nil {
		return err
	}
	val, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("store: encode approval %s: %w", a.ID, err)
	}
	if _, err := s.approvals.Put(ctx, a.ID, val); err != nil {
		return fmt.Errorf("store: put approval %s: %w", a.ID, err)
	}
	return nil
}

func (s *Store) getApproval(ctx context.Context, id string) (Approval, uint64, error) {
	if err := checkID(id); err != nil {
		return Approval{}, 0, err
	}
	e, err := s.approvals.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Approval{}, 0, fmt.Errorf("%w: approval %s", ErrNotFound, id)
	}
	if err != nil {
		return Approval{}, 0, fmt.Errorf("store: get approval %s: %w", id, err)
	}
	var a Approval
	if err := json.Unmarshal(e.Value(), &a); err != nil {
		return Approval{}, 0, fmt.Errorf("store: decode approval %s: %w", id, err)
	}
	return a, e.Revision(), nil
}

// ListApprovals returns the approvals, only the pending ones if
// pendingOnly, oldest RequestedAt first.
func (s *Store) ListApprovals(ctx context.Context, pendingOnly bool) ([]Approval, error) {
	entries, err := s.snapshot(ctx, ApprovalsBucket)
	if err != nil {
		return nil, fmt.Errorf("store: list approvals: %w", err)
	}
	out := make([]Approval, 0, len(entries))
	for _, e := range entries {
		a, ok := s.decodeApproval(e)
		if ok && (!pendingOnly || a.Pending()) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b Approval) int {
		return cmp.Or(a.RequestedAt.Compare(b.RequestedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// Decide records a person's decision on approval id, once: a second
// decision gets ErrDecided (wrapping the first), an unknown id ErrNotFound.
// Concurrent deciders are settled by compare-and-set: exactly one wins.
func (s *Store) Decide(ctx context.Context, id string, allow bool, reason string) (Approval, error) {
	decision := DecisionDeny
	if allow {
		decision = DecisionAllow
	}
	for range UpdateAttempts {
		a, rev, err := s.getApproval(ctx, id)
		if err != nil {
			return Approval{}, err
		}
		if !a.Pending() {
			return a, fmt.Errorf("%w: approval %s was %s", ErrDecided, id, a.Decision)
		}
		a.Decision, a.Reason, a.DecidedAt = decision, reason, s.cfg.Now().UTC()
		val, err := json.Marshal(a)
		if err != nil {
			return Approval{}, fmt.Errorf("store: encode approval %s: %w", id, err)
		}
		_, err = s.approvals.Update(ctx, id, val, rev)
		if err == nil {
			return a, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return Approval{}, fmt.Errorf("store: decide approval %s: %w", id, err)
		}
	}
	return Approval{}, fmt.Errorf("%w: approval %s", ErrConflict, id)
}

// WatchApprovals sends every approval's current value, then each change
// (new requests and decisions), until ctx ends; then the channel is
// closed. Deletions are not sent. The reader must keep reading or cancel
// ctx.
func (s *Store) WatchApprovals(ctx context.Context) (<-chan Approval, error) {
	return watch(ctx, s, ApprovalsBucket, storedApprovals, ">", s.decodeApproval)
}

// decodeApproval reads a stored approval; one that does not decode is
// logged and skipped.
func (s *Store) decodeApproval(m *storedMsg) (Approval, bool) {
	var a Approval
	if err := json.Unmarshal(m.data, &a); err != nil {
		s.log.Warn("store: skipping unreadable approval", "key", kvKey(ApprovalsBucket, m), "err", err)
		return a, false
	}
	return a, true
}
