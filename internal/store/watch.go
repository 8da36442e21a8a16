package store

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// snapshotWait bounds a snapshot whose ctx has no deadline.
const snapshotWait = 30 * time.Second

// snapshot reads the current value of every live key of kv in one pass (a
// KV watch up to its end-of-initial-values marker).
func snapshot(ctx context.Context, kv jetstream.KeyValue) ([]jetstream.KeyValueEntry, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, snapshotWait)
		defer cancel()
	}
	// The watch's subscription waits on its ctx to unsubscribe: always hand
	// it one that ends.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer stopWatcher(w)
	var out []jetstream.KeyValueEntry
	for {
		select {
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return nil, errors.New("watch closed before its initial values")
			case e == nil:
				return out, nil
			}
			out = append(out, e)
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// watch follows the keys of kv matching keys: current values, then
// updates, each converted by conv (false skips it), on a channel closed
// when ctx ends or the connection closes. Deletes are not sent.
func watch[T any](ctx context.Context, kv jetstream.KeyValue, keys string, log *slog.Logger,
	conv func(jetstream.KeyValueEntry) (T, bool)) (<-chan T, error) {
	ctx, cancel := context.WithCancel(ctx)
	w, err := kv.Watch(ctx, keys, jetstream.IgnoreDeletes())
	if err != nil {
		cancel()
		return nil, err
	}
	out := make(chan T, 16)
	go func() {
		defer close(out)
		defer stopWatcher(w)
		defer cancel()
		for {
			var e jetstream.KeyValueEntry
			var ok bool
			select {
			case <-ctx.Done():
				return
			case e, ok = <-w.Updates():
			}
			if !ok {
				log.Warn("store: watch ended", "bucket", kv.Bucket(), "keys", keys)
				return
			}
			if e == nil { // end of the current values
				continue
			}
			v, keep := conv(e)
			if !keep {
				continue
			}
			select {
			case out <- v:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// stopWatcher stops w and drains its channel until the library closes it:
// the library's callback blocks sending to a full channel, and only after
// it returns does the subscription end and the channel close.
func stopWatcher(w jetstream.KeyWatcher) {
	_ = w.Stop()
	go func() {
		for range w.Updates() {
		}
	}()
}
