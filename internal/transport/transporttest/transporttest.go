// Package transporttest is the conformance suite every transport.Transport
// runs: one set of cases, so each implementation (NATS over TCP, NATS
// in-process, any later one) gives multi-reply requests, no-responders,
// silence detection and bounded serving the same meaning.
//
// Every wait in the suite is bounded; a broken implementation fails, it
// does not hang.
package transporttest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// Limits are the knobs of the contract a case needs to set. Zero means the
// implementation's default.
type Limits struct {
	// MaxPending: messages a Serve subscription queues beyond maxConcurrent.
	MaxPending int
}

// NewPair returns two connected transports with the given limits: the
// suite requests on client and serves on server. They may share one
// connection or use two. The factory registers its own cleanup.
type NewPair func(t *testing.T, l Limits) (client, server transport.Transport)

// wait bounds every case.
const wait = 10 * time.Second

// Run runs the whole suite.
func Run(t *testing.T, newPair NewPair) {
	cases := []struct {
		name string
		run  func(t *testing.T, newPair NewPair)
	}{
		{"ProgressThenFinal", testProgressThenFinal},
		{"ConcurrentCalls", testConcurrentCalls},
		{"NoResponders", testNoResponders},
		{"Silent", testSilent},
		{"BoundedConcurrencyAndOverload", testBoundedConcurrency},
		{"UnboundedConcurrency", testUnboundedConcurrency},
		{"StopCancelsHandlersAndRefusesQueued", testStop},
		{"CallCloseTwice", testCallClose},
		{"FinalNeverDropped", testFinalNeverDropped},
		{"Publish", testPublish},
		{"HandlerPanic", testHandlerPanic},
		{"RequestFunc", testRequestFunc},
		{"RequestFuncNoResponders", testRequestFuncNoResponders},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newPair) })
	}
}

var subjects atomic.Int64

// subject returns a subject no other case uses.
func subject(t *testing.T) string {
	return fmt.Sprintf("transporttest.%d.%d", time.Now().UnixNano(), subjects.Add(1))
}

func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

// serve registers h, flushes so the server knows, and stops it at cleanup.
func serve(t *testing.T, ctx context.Context, tr transport.Transport, subj string, max int, h transport.Handler) transport.Subscription {
	t.Helper()
	sub, err := tr.Serve(subj, "", max, h)
	if err != nil {
		t.Fatalf("Serve: %v", err)
	}
	t.Cleanup(func() { _ = sub.Stop() })
	if err := tr.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	return sub
}

func request(t *testing.T, ctx context.Context, tr transport.Transport, subj string, m wire.Msg) transport.Call {
	t.Helper()
	call, err := transport.Request(ctx, tr, subj, m)
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	t.Cleanup(call.Close)
	return call
}

// recv waits for a signal, failing the test after the suite's bound.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}
