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

// Offloader keeps payloads too large for one NATS message (over the
// server's max payload, 1 MiB by default) out of band: the sender puts the
// bytes and sends the returned reference instead, the receiver gets the
// bytes back by that reference. References are opaque strings, valid on
// every process connected to the same NATS system. The transport defines
// the same two methods where it needs them; *Store satisfies it.
//
// Payloads are not expired: whoever knows a payload is no longer needed
// (typically the receiver, after reading it) deletes it with
// Store.DeletePayload.
type Offloader interface {
	PutPayload(ctx context.Context, data []byte) (ref string, err error)
	GetPayload(ctx context.Context, ref string) ([]byte, error)
}

var _ Offloader = (*Store)(nil)

// payloadPrefix names transport payloads in TransfersBucket. A reference
// is "payloads/<random>.<sha256 of the body>": the reader checks the body
// against it, so a reference names the one object its message created and
// nothing else (never a run record, which lives in another bucket).
const payloadPrefix = "payloads/"

// PutPayload stores data in the transfers object store and returns its
// reference.
func (s *Store) PutPayload(ctx context.Context, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	ref := payloadPrefix + uuid.NewString() + "." + hex.EncodeToString(sum[:])
	ob, err := s.transferStore(ctx)
	if err != nil {
		return "", fmt.Errorf("store: put payload: %w", err)
	}
	if _, err := ob.PutBytes(ctx, ref, data); err != nil {
		return "", fmt.Errorf("store: put payload: %w", err)
	}
	return ref, nil
}

// checkRef refuses what is not a reference PutPayload made.
func checkRef(ref string) (sum string, err error) {
	name, ok := strings.CutPrefix(ref, payloadPrefix)
	id, sum, ok2 := strings.Cut(name, ".")
	if !ok || !ok2 || uuid.Validate(id) != nil || len(sum) != sha256.Size*2 || strings.ContainsAny(sum, "/.") {
		return "", fmt.Errorf("%w: %q is not a payload reference", ErrInvalidConfig, ref)
	}
	return sum, nil
}

// payloadReadTimeout bounds one payload read, the largest included.
const payloadReadTimeout = 10 * time.Second

// GetPayload returns the payload stored under ref, or ErrNotFound. A body
// that does not match the hash its reference names is refused.
func (s *Store) GetPayload(ctx context.Context, ref string) ([]byte, error) {
	want, err := checkRef(ref)
	if err != nil {
		return nil, err
	}
	// An object past its retention loses its chunks before its info, and a
	// read in between waits for chunks that never come: bound it.
	ctx, cancel := context.WithTimeout(ctx, payloadReadTimeout)
	defer cancel()
	ob, err := s.transferStore(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: get payload %s: %w", ref, err)
	}
	st, err := s.objectStream(ctx, TransfersBucket)
	if err != nil {
		return nil, fmt.Errorf("store: get payload %s: %w", ref, err)
	}
	data, err := readObject(ctx, ob, st, TransfersBucket, ref)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: payload %s", ErrNotFound, ref)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get payload %s: %w", ref, err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != want {
		return nil, fmt.Errorf("%w: payload %s does not match its reference", ErrNotFound, ref)
	}
	return data, nil
}

// DeletePayload removes the payload stored under ref. Deleting a missing
// payload is no error (the object store itself does not tell a deleted
// object from a live one on Delete), so cleanup can be retried freely.
// Only payload references are deleted: never a run record.
func (s *Store) DeletePayload(ctx context.Context, ref string) error {
	if _, err := checkRef(ref); err != nil {
		return err
	}
	ob, err := s.transferStore(ctx)
	if err != nil {
		return fmt.Errorf("store: delete payload %s: %w", ref, err)
	}
	if err := ob.Delete(ctx, ref); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("store: delete payload %s: %w", ref, err)
	}
	return nil
}
