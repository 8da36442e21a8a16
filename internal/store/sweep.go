package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// EmptyWorkerTransfers lists the workers' transfers buckets that hold
// nothing: every body in them was taken or aged out (Config.Retention).
// Each is a stream of the server's, and a worker whose id is new at every
// start (a coordinator's local workers) leaves one behind each time; the
// coordinators remove those of workers they no longer know
// (RemoveWorkerTransfers).
func (s *Store) EmptyWorkerTransfers(ctx context.Context) ([]string, error) {
	if s.cfg.Client || s.own != TransfersBucket {
		return nil, fmt.Errorf("store: list transfers of workers: %w", ErrClient)
	}
	names := s.js.ObjectStoreNames(ctx)
	var empty []string
	for name := range names.Name() {
		if !isWorkerTransfers(name) {
			continue
		}
		ob, err := s.js.ObjectStore(ctx, name)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return empty, fmt.Errorf("store: transfers %s: %w", name, err)
		}
		st, err := ob.Status(ctx)
		if err != nil {
			return empty, fmt.Errorf("store: transfers %s: %w", name, err)
		}
		if st.Size() == 0 {
			empty = append(empty, name)
		}
	}
	if err := names.Error(); err != nil {
		return empty, fmt.Errorf("store: list transfers of workers: %w", err)
	}
	return empty, nil
}

// RemoveWorkerTransfers deletes a worker's transfers bucket (one
// EmptyWorkerTransfers listed). A bucket already gone is not an error.
func (s *Store) RemoveWorkerTransfers(ctx context.Context, bucket string) error {
	if s.cfg.Client || s.own != TransfersBucket {
		return fmt.Errorf("store: remove transfers %s: %w", bucket, ErrClient)
	}
	if !isWorkerTransfers(bucket) {
		return fmt.Errorf("store: remove transfers %s: not a worker's transfers bucket", bucket)
	}
	s.tmu.Lock()
	delete(s.buckets, bucket)
	s.tmu.Unlock()
	if err := s.js.DeleteObjectStore(ctx, bucket); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("store: remove transfers %s: %w", bucket, err)
	}
	return nil
}
