package store

import (
	"errors"

	"github.com/formica-run/formica/internal/ids"
)

// Sentinel errors. Every error the package returns that matches one of these
// wraps it with %w, so callers test with errors.Is.
var (
	// ErrInvalidConfig reports a Config that cannot work; the wrapping error
	// names the field.
	ErrInvalidConfig = errors.New("store: invalid config")

	// ErrInvalidID reports an id that breaks the one id rule (ids.Check):
	// it is ids.ErrInvalid itself, so callers test either.
	ErrInvalidID = ids.ErrInvalid

	// ErrIDTaken reports a submission whose run id belongs to a run with a
	// different task or spec (the same submission again is a duplicate).
	ErrIDTaken = errors.New("already used by a different submission")

	// ErrNotFound reports a record, approval or payload that does not exist.
	ErrNotFound = errors.New("store: not found")

	// ErrExists reports a create of a record that already exists.
	ErrExists = errors.New("store: already exists")

	// ErrDecided reports a decision on an approval that was already decided.
	ErrDecided = errors.New("store: approval already decided")

	// ErrConflict reports a compare-and-set update that kept losing to
	// concurrent writers and gave up after a bounded number of attempts.
	ErrConflict = errors.New("store: too many concurrent updates")

	// ErrTooLarge reports a submission larger than one NATS message.
	ErrTooLarge = errors.New("store: too large for one message")

	// ErrSettled reports an Ack, Nak, Term or InProgress on a submission that
	// was already acked, nakked or terminated.
	ErrSettled = errors.New("store: submission already settled")

	// ErrClient reports a call only a coordinator's store supports (Next)
	// on a store opened with Config.Client.
	ErrClient = errors.New("store: not available to a client store")
)
