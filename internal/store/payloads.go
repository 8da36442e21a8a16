package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
)

// Transfers keep payloads too large for one NATS message (over the
// server's max payload, 1 MiB by default) out of band: the sender puts the
// bytes into its own transfers bucket and sends the returned reference
// instead, the receiver gets the bytes back by that reference. References
// are opaque strings, valid on every process connected to the same NATS
// system. *Store is the transport's natstransport.Offloader (PutPayload,
// GetPayload), the interface its consumer owns.
//
// Each worker has a transfers bucket of its own, WorkerTransfers(w) (made
// by a coordinator when w joins; a worker creates no stream): it writes
// its bodies there, and the coordinators write there the bodies they send
// it (to), so no worker reads what was sent to another. The coordinators
// write the rest (to clients, to each other) into TransfersBucket. A
// reference names its bucket, and GetPayload reads it only when that is the
// bucket the party the message came from writes to this reader (from), so
// no message can make its reader fetch, or drop, a body someone else wrote.
// A body is deleted by its bucket's owner, or by a coordinator (the
// authority); the buckets' TTL (Config.Retention) bounds the rest.

// payloadPrefix starts transport payloads' object names in their bucket. A
// reference is "<bucket>/<random>.<sha256 of the body>", the object's name
// in that bucket "payloads/<random>.<sha256>": the reader checks the body
// against it, so a reference names the one object its message created and
// nothing else (never a run record, which lives in another bucket). A
// reference "payloads/<random>.<sha256>" (as stores before per-party
// buckets wrote them, in journals) names the coordinators' bucket.
const payloadPrefix = "payloads/"

// workerTransfersPrefix starts the names of workers' transfers buckets.
const workerTransfersPrefix = TransfersBucket + "_w_"

// WorkerTransfers is the bucket worker id writes its bodies into: the
// worker's id with every byte outside [A-Za-z0-9-] written as _ and two hex
// digits, so that distinct ids name distinct buckets.
func WorkerTransfers(id string) string {
	var b strings.Builder
	b.WriteString(workerTransfersPrefix)
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "_%02x", c)
		}
	}
	return b.String()
}

// FromCoordinators is the sender (natstransport.Config.Sender) of every
// message a client receives: only coordinators send it requests or answer
// its own, so a reference must name the coordinators' bucket.
func FromCoordinators(string) string { return TransfersBucket }

// ToWorker is the bucket worker id reads what the coordinators send it
// from (natstransport.Config.Sender of a worker): its own.
func ToWorker(id string) func(string) string {
	bucket := WorkerTransfers(id)
	return func(string) string { return bucket }
}

// isTransfers reports whether bucket is a transfers bucket: the
// coordinators' or a worker's.
func isTransfers(bucket string) bool {
	return bucket == TransfersBucket || isWorkerTransfers(bucket)
}

func isWorkerTransfers(bucket string) bool {
	rest, ok := strings.CutPrefix(bucket, workerTransfersPrefix)
	return ok && rest != "" && !strings.ContainsAny(rest, "./*> ")
}

// ErrNoTransfers reports a body too large for one message from a store
// that has no transfers bucket of its own (a client's): clients send every
// message inline, within the NATS max payload.
var ErrNoTransfers = errors.New("store: this party has no transfers bucket: the body must fit one NATS message")

// ErrForeignRef reports a reference into a bucket other than its sender's,
// or one this store may not delete.
var ErrForeignRef = errors.New("store: reference outside its sender's bucket")

// PutPayload stores data and returns its reference: in this store's own
// transfers bucket, or, for a coordinator's store, in to, the bucket of
// the worker it is sent to ("" for none: its own).
func (s *Store) PutPayload(ctx context.Context, to string, data []byte) (string, error) {
	if s.own == "" {
		return "", fmt.Errorf("store: put payload of %d bytes: %w", len(data), ErrNoTransfers)
	}
	bucket := s.own
	if to != "" && to != s.own {
		if s.own != TransfersBucket || !isWorkerTransfers(to) {
			return "", fmt.Errorf("%w: %s may not write into %s", ErrForeignRef, s.own, to)
		}
		bucket = to
	}
	sum := sha256.Sum256(data)
	id := uuid.NewString() + "." + hex.EncodeToString(sum[:])
	b, err := s.bucket(ctx, bucket)
	if err != nil {
		return "", fmt.Errorf("store: put payload: %w", err)
	}
	if _, err := b.ob.PutBytes(ctx, payloadPrefix+id, data); err != nil {
		return "", fmt.Errorf("store: put payload: %w", err)
	}
	return bucket + "/" + id, nil
}

// payloadRef is a parsed reference.
type payloadRef struct {
	bucket, name, sum string
}

// parseRef refuses what is not a reference PutPayload made.
func parseRef(ref string) (payloadRef, error) {
	bucket, id, ok := strings.Cut(ref, "/")
	if bucket+"/" == payloadPrefix {
		bucket = TransfersBucket
	}
	uid, sum, ok2 := strings.Cut(id, ".")
	if !ok || !ok2 || !isTransfers(bucket) || uuid.Validate(uid) != nil || len(sum) != sha256.Size*2 || strings.ContainsAny(sum, "/.") {
		return payloadRef{}, fmt.Errorf("%w: %q is not a payload reference", ErrInvalidConfig, ref)
	}
	return payloadRef{bucket: bucket, name: payloadPrefix + id, sum: sum}, nil
}

// payloadReadTimeout bounds one payload read, the largest included.
const payloadReadTimeout = 10 * time.Second

// GetPayload returns the payload stored under ref, or ErrNotFound. from is
// the bucket of the party the reference came from: a reference into any
// other bucket is refused unread (ErrForeignRef). A body that does not
// match the hash its reference names is refused.
func (s *Store) GetPayload(ctx context.Context, from, ref string) ([]byte, error) {
	r, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	if r.bucket != from {
		return nil, fmt.Errorf("%w: %s, sent by the owner of %q", ErrForeignRef, ref, from)
	}
	return s.readPayload(ctx, r)
}

// readPayload reads a parsed reference.
func (s *Store) readPayload(ctx context.Context, r payloadRef) ([]byte, error) {
	// An object past its retention loses its chunks before its info, and a
	// read in between waits for chunks that never come: bound it.
	ctx, cancel := context.WithTimeout(ctx, payloadReadTimeout)
	defer cancel()
	ref := r.bucket + "/" + r.name
	b, err := s.bucket(ctx, r.bucket)
	if err != nil {
		return nil, fmt.Errorf("store: get payload %s: %w", ref, err)
	}
	data, err := s.readObject(ctx, b.ob, r.bucket, r.name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: payload %s", ErrNotFound, ref)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get payload %s: %w", ref, err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != r.sum {
		return nil, fmt.Errorf("%w: payload %s does not match its reference", ErrNotFound, ref)
	}
	return data, nil
}

// MayDeletePayload reports whether this store deletes the payload under
// ref: one in its own bucket (what it wrote, and what was sent to it), or,
// for a coordinator's store (the authority), any transfers bucket's.
func (s *Store) MayDeletePayload(ref string) bool {
	r, err := parseRef(ref)
	return err == nil && s.own != "" && (r.bucket == s.own || s.own == TransfersBucket)
}

// DeletePayload removes the payload stored under ref. Deleting a missing
// payload is no error (the object store itself does not tell a deleted
// object from a live one on Delete), so cleanup can be retried freely.
// Only payload references are deleted, never a run record, and only those
// MayDeletePayload allows (ErrForeignRef otherwise, asking the server
// nothing).
func (s *Store) DeletePayload(ctx context.Context, ref string) error {
	r, err := parseRef(ref)
	if err != nil {
		return err
	}
	if !s.MayDeletePayload(ref) {
		return fmt.Errorf("%w: %s is not this party's to delete", ErrForeignRef, ref)
	}
	b, err := s.bucket(ctx, r.bucket)
	if err != nil {
		return fmt.Errorf("store: delete payload %s: %w", ref, err)
	}
	if err := b.ob.Delete(ctx, r.name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("store: delete payload %s: %w", ref, err)
	}
	return nil
}
