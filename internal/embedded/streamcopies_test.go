package embedded

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/wire"
)

// TestStreamCopiesAreNotPeersMessages: the server answers a direct get on
// whatever subject its asker names, checking no permission there. A
// client, which may append its cancel request to FORMICA_CANCELS and
// direct-get any stream, stores a worker heartbeat of its making there and
// has the server deliver it on worker w9's heartbeat subject: the copy
// arrives (the test sees it), and the coordinator, which drops every
// stream's copy on the subjects where peers speak, does not register w9.
// A real heartbeat sent after it registers its worker.
func TestStreamCopiesAreNotPeersMessages(t *testing.T) {
	s, _ := startSecured(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	target := wire.SubjectWorkerHeartbeat("w9")
	watch := mustConn(t, s, "coordinator-view")
	seen, err := watch.SubscribeSync(wire.SubjectWorkerHeartbeats)
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}

	eve, err := s.ConnectAs(auth.Client, "eve", "eve")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eve.Close)
	forged, err := wire.Encode(wire.TypeWorkerHeartbeat, wire.WorkerHeartbeat{ID: "w9", Host: "eve", Slots: 64,
		Started: time.Now(), Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eve.RequestWithContext(ctx, store.SubjectCancel("forged"), forged); err != nil {
		t.Fatalf("a client's cancel request: %v", err)
	}
	get, _ := json.Marshal(map[string]string{"last_by_subj": store.SubjectCancel("forged")})
	if err := eve.PublishRequest("$JS.API.DIRECT.GET."+store.CancelsStream, target, get); err != nil {
		t.Fatal(err)
	}
	copied, err := seen.NextMsg(runTimeout)
	if err != nil {
		t.Fatalf("the stream's copy never came on %s: %v", target, err)
	}
	if copied.Subject != target || copied.Header.Get(nats.JSStream) != store.CancelsStream {
		t.Fatalf("got %s with headers %v; want the stream's copy on %s", copied.Subject, copied.Header, target)
	}

	// A real heartbeat after it, on the same subscription's order.
	w8, err := s.ConnectAs(auth.Worker, "w8", "w8")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w8.Close)
	real, err := wire.Encode(wire.TypeWorkerHeartbeat, wire.WorkerHeartbeat{ID: "w8", Host: "w8", Slots: 1,
		Started: time.Now(), Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := w8.Publish(wire.SubjectWorkerHeartbeat("w8"), real); err != nil {
		t.Fatal(err)
	}
	for {
		ids := workerIDs(s)
		if slices.Contains(ids, "w8") {
			if slices.Contains(ids, "w9") {
				t.Fatalf("workers %v: the forged w9 was registered", ids)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("w8's heartbeat was not registered: workers %v", ids)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func workerIDs(s *Stack) []string {
	var ids []string
	for _, w := range s.Coordinator.Workers() {
		ids = append(ids, w.ID)
	}
	return ids
}
