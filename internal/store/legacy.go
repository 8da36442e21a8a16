package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
)

// Before TransfersStream, bodies sent by reference lived in object store
// buckets, a stream each: formica_transfers (the coordinators') and
// formica_transfers_w_<worker> (one per worker, the id's bytes outside
// [A-Za-z0-9-] written as _ and two hex digits). Nothing writes there any
// more. Journals may still name their objects (a large entry written
// before the upgrade): those references are read from the bucket they must
// be in, never deleted, while it lasts; the coordinators remove each
// bucket once no chunk is left in it (RemoveDrainedTransfers), which its
// TTL (Config.Retention) ensures within that long of the upgrade.

// legacyBucket is the coordinators' transfers bucket of earlier versions.
const legacyBucket = "formica_transfers"

// legacyWorkers starts the names of the workers' buckets of earlier
// versions.
const legacyWorkers = legacyBucket + "_w_"

// legacyRef is an object of an earlier version's transfers bucket.
type legacyRef struct{ bucket, name string }

// parseLegacyRef parses what an earlier version's PutPayload returned,
// "<bucket>/<random>.<sha256>" (or "payloads/<random>.<sha256>", the
// coordinators' bucket), place and id being the parts around the slash.
func parseLegacyRef(bucket, id string, bad error) (payloadRef, error) {
	if bucket == "payloads" {
		bucket = legacyBucket
	}
	uid, sum, ok := strings.Cut(id, ".")
	if !ok || !isLegacyBucket(bucket) || uuid.Validate(uid) != nil || !isSum(sum) {
		return payloadRef{}, bad
	}
	return payloadRef{id: uid, sum: sum, legacy: &legacyRef{bucket: bucket, name: "payloads/" + id}}, nil
}

// isLegacyBucket reports whether bucket is an earlier version's transfers
// bucket.
func isLegacyBucket(bucket string) bool {
	rest, ok := strings.CutPrefix(bucket, legacyWorkers)
	return bucket == legacyBucket || ok && rest != "" && !strings.ContainsAny(rest, "./*> ")
}

// legacyBucketOf is the bucket where the party of place wrote before the
// shared stream.
func legacyBucketOf(place string) string {
	id, ok := strings.CutPrefix(place, fromWorkers)
	if !ok {
		return legacyBucket
	}
	var b strings.Builder
	b.WriteString(legacyWorkers)
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

// readLegacy reads an earlier version's object.
func (s *Store) readLegacy(ctx context.Context, r payloadRef) ([]byte, error) {
	ob, err := s.js.ObjectStore(ctx, r.legacy.bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w: bucket %s removed", ErrNotFound, r.legacy.bucket)
	}
	if err != nil {
		return nil, err
	}
	data, err := s.readObject(ctx, ob, r.legacy.bucket, r.legacy.name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, err)
	}
	return data, err
}

// RemoveDrainedTransfers removes the transfers buckets of earlier versions
// that hold no chunk any more (each body in them was deleted or aged out),
// and returns those removed and how many are left.
func (s *Store) RemoveDrainedTransfers(ctx context.Context) (removed []string, left int, err error) {
	if s.cfg.Client || s.place != CoordinatorsPlace {
		return nil, 0, fmt.Errorf("store: remove drained transfers: %w", ErrClient)
	}
	names := s.js.ObjectStoreNames(ctx)
	var errs []error
	for name := range names.Name() {
		if !isLegacyBucket(name) {
			continue
		}
		if err := s.removeDrained(ctx, name); errors.Is(err, errNotDrained) {
			left++
		} else if err != nil {
			left++
			errs = append(errs, err)
		} else {
			removed = append(removed, name)
		}
	}
	if err := names.Error(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return removed, left, fmt.Errorf("store: remove drained transfers: %w", err)
	}
	return removed, left, nil
}

var errNotDrained = errors.New("store: transfers bucket not drained")

// removeDrained removes bucket if no chunk is left in it (a deleted
// object leaves a marker, which holds no body).
func (s *Store) removeDrained(ctx context.Context, bucket string) error {
	st, err := s.js.Stream(ctx, ObjectStream(bucket))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil // removed meanwhile
	}
	if err != nil {
		return fmt.Errorf("%s: %w", bucket, err)
	}
	_, err = st.GetLastMsgForSubject(ctx, "$O."+bucket+".C.>")
	switch {
	case err == nil:
		return errNotDrained
	case !errors.Is(err, jetstream.ErrMsgNotFound):
		return fmt.Errorf("%s: %w", bucket, err)
	}
	if err := s.js.DeleteStream(ctx, ObjectStream(bucket)); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("%s: %w", bucket, err)
	}
	return nil
}
