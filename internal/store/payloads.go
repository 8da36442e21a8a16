package store

import (
	"context"
	"errors"
	"fmt"

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

// payloadPrefix names transport payloads in PayloadsBucket; large run
// records live beside them under "records/".
const payloadPrefix = "payloads/"

// PutPayload stores data in the object store and returns its reference.
func (s *Store) PutPayload(ctx context.Context, data []byte) (string, error) {
	ref := payloadPrefix + uuid.NewString()
	if _, err := s.payloads.PutBytes(ctx, ref, data); err != nil {
		return "", fmt.Errorf("store: put payload: %w", err)
	}
	return ref, nil
}

// GetPayload returns the payload stored under ref, or ErrNotFound.
func (s *Store) GetPayload(ctx context.Context, ref string) ([]byte, error) {
	data, err := s.payloads.GetBytes(ctx, ref)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: payload %s", ErrNotFound, ref)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get payload %s: %w", ref, err)
	}
	return data, nil
}

// DeletePayload removes the payload stored under ref. Deleting a missing
// payload is no error (the object store itself does not tell a deleted
// object from a live one on Delete), so cleanup can be retried freely.
func (s *Store) DeletePayload(ctx context.Context, ref string) error {
	if err := s.payloads.Delete(ctx, ref); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("store: delete payload %s: %w", ref, err)
	}
	return nil
}
