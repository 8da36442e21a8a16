package store

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The records and approvals buckets are read the way a client may: a key
// by a direct get (KeyValue.Get), every key by direct gets of the whole
// stream (snapshot), a key or all of them followed through the bucket's
// RePublish (watch). No KV watch: that is a consumer (see follower).

// snapshotWait bounds a snapshot whose ctx has no deadline.
const snapshotWait = 30 * time.Second

// kvStream is the stream behind KV bucket.
func kvStream(bucket string) string { return "KV_" + bucket }

// kvSubject is key's subject in bucket (">": every key's).
func kvSubject(bucket, key string) string { return "$KV." + bucket + "." + key }

// kvKey is the key of m, a message of bucket.
func kvKey(bucket string, m *storedMsg) string {
	return strings.TrimPrefix(m.subject, kvSubject(bucket, ""))
}

// kvOperation is the header that marks a KV delete or purge.
const kvOperation = "KV-Operation"

// deleted reports whether m removes its key rather than setting it: a
// delete or purge, or the server's marker of a key aged out.
func deleted(m *storedMsg) bool {
	return m.hdr.Get(kvOperation) != "" || m.hdr.Get(jetstream.MarkerReasonHeader) != ""
}

// snapshot reads the current value of every live key of bucket in one
// pass over its stream, oldest write first: the stream keeps one message
// per key (History 1), and a key written again during the pass is read
// again, later, so its last value wins.
func (s *Store) snapshot(ctx context.Context, bucket string) ([]*storedMsg, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, snapshotWait)
		defer cancel()
	}
	current := map[string]*storedMsg{}
	err := s.readDirect(ctx, kvStream(bucket), kvSubject(bucket, ">"), 1, directBatch, func(m *storedMsg) error {
		if deleted(m) {
			delete(current, kvKey(bucket, m))
		} else {
			current[kvKey(bucket, m)] = m
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return slices.SortedFunc(maps.Values(current), func(a, b *storedMsg) int { return cmp.Compare(a.seq, b.seq) }), nil
}

// watch follows key of bucket (">": every key), which republishes into
// tree: current values, then updates, each converted by conv (false skips
// it), on a channel closed when ctx ends or the connection closes. Deletes
// are not sent.
func watch[T any](ctx context.Context, s *Store, bucket, tree, key string, conv func(*storedMsg) (T, bool)) (<-chan T, error) {
	out := make(chan T, 16)
	f := &follower{s: s, stream: kvStream(bucket), filter: kvSubject(bucket, key), whole: key == ">",
		live: tree + "." + key,
		deliver: func(m *storedMsg) (bool, error) {
			if deleted(m) {
				return false, nil
			}
			v, keep := conv(m)
			if !keep {
				return false, nil
			}
			select {
			case out <- v:
				return false, nil
			case <-ctx.Done():
				return false, context.Cause(ctx)
			}
		}}
	sub, err := f.subscribe()
	if err != nil {
		return nil, err
	}
	go func() {
		defer close(out)
		if err := f.run(ctx, sub); ctx.Err() == nil {
			s.log.Warn("store: watch ended", "bucket", bucket, "key", key, "err", err)
		}
	}()
	return out, nil
}
