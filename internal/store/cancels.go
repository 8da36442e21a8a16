package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/wire"
)

// Cancel requests: a client's request to cancel a whole run, kept on
// CancelsStream under the run's own subject. Only coordinators write run
// records; a client that asks for a cancel appends it here first, so a
// cancel sent while no coordinator runs is kept, and the coordinator that
// next picks the run up honours it (CancelRequested). Clients may append
// here and read, never delete or purge.
const (
	// CancelsStream holds the last cancel request of each run
	// (LimitsPolicy, one message per subject, MaxAge = Retention).
	CancelsStream = "FORMICA_CANCELS"
	// SubjectCancels matches every run's cancel-request subject.
	SubjectCancels = "formica.cancels.*"
)

// Bounds of CancelsStream: a request is a few dozen bytes, and a flood of
// requests for made-up run ids pushes out the oldest, never grows the disk.
const (
	cancelMaxMsgSize = 1 << 10
	cancelMaxBytes   = 64 << 20
)

// SubjectCancel is run id's subject on CancelsStream.
func SubjectCancel(run string) string { return "formica.cancels." + run }

// cancelsStreamConfig is CancelsStream's configuration.
func cancelsStreamConfig(cfg Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              CancelsStream,
		Description:       "Formica cancel requests of runs, kept until a coordinator honours them",
		Subjects:          []string{SubjectCancels},
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxMsgsPerSubject: 1,
		MaxAge:            cfg.Retention,
		MaxBytes:          cancelMaxBytes,
		MaxMsgSize:        cancelMaxMsgSize,
		DenyDelete:        true,
		DenyPurge:         true,
		AllowDirect:       true,
		Storage:           jetstream.FileStorage,
		Replicas:          cfg.Replicas,
	}
}

// RequestCancel appends a request to cancel run id, for the execution the
// record counts resumes of, and returns once the stream has stored it.
func (s *Store) RequestCancel(ctx context.Context, id string, resumes int) error {
	if err := checkID(id); err != nil {
		return err
	}
	data, err := wire.Encode(wire.TypeRunCancel, wire.RunCancel{RunID: id, Resumes: resumes})
	if err != nil {
		return fmt.Errorf("store: cancel request %s: %w", id, err)
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if _, err := s.js.Publish(ctx, SubjectCancel(id), data, jetstream.WithExpectStream(CancelsStream)); err != nil {
		return fmt.Errorf("store: cancel request %s: %w", id, err)
	}
	return nil
}

// CancelRequested reports whether a client asked to cancel run id's
// execution number resumes (the record's Resumes). A request that does not
// decode, or names another run, does not count.
func (s *Store) CancelRequested(ctx context.Context, id string, resumes int) (bool, error) {
	if err := checkID(id); err != nil {
		return false, err
	}
	if s.cancels == nil {
		return false, nil // a store over the transfers alone
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	m, err := s.cancels.GetLastMsgForSubject(ctx, SubjectCancel(id))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("store: read cancel request %s: %w", id, err)
	}
	var rc wire.RunCancel
	if err := wire.DecodeAs(m.Data, wire.TypeRunCancel, &rc); err != nil {
		s.log.Warn("store: ignoring undecodable cancel request", "run", id, "err", err)
		return false, nil
	}
	return rc.RunID == id && rc.Resumes == resumes, nil
}
