package embedded

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/wire"
)

// clientStreams are the streams a client reads the most: the events, the
// records and the approvals.
var clientStreams = []string{store.EventsStream, "KV_" + store.RunsBucket, "KV_" + store.ApprovalsBucket}

// refusals connects as role/id and hands over, as they come, the errors
// the server reports to the connection (its permission violations).
func refusals(t *testing.T, s *Stack, role auth.Role, id string) (*nats.Conn, <-chan error) {
	t.Helper()
	creds, err := s.authority.Issue(role, id)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 64)
	nc, err := s.Server.Connect(string(role)+"-"+id, append(creds.Options(), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		errs <- err
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, errs
}

// awaitRefusal waits, bounded, for the server's permission violation on
// what.
func awaitRefusal(t *testing.T, errs <-chan error, what string) {
	t.Helper()
	select {
	case err := <-errs:
		if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Errorf("%s: %v, want a permissions violation", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("%s: not refused", what)
	}
}

// TestClientsCreateNoConsumers: a push consumer delivers what its stream
// holds on the deliver subject its creator names, and the server checks
// no permission there, so a client that could create one on the events,
// records or approvals stream could have the server publish stored bytes
// as an exec request on a worker's subject. A client's credentials create
// none, by a raw API request (with or without a filter, durable or not)
// or through the jetstream library: each is refused, no consumer exists,
// and worker w1 listening on its exec subject receives nothing. The same
// consumer made with a coordinator's credentials does deliver there.
func TestClientsCreateNoConsumers(t *testing.T) {
	s, cl := startSecured(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	// Something in each stream to deliver: a finished run's record and
	// events, an approval.
	rec := runAsync(t, ctx, cl, simSubmit(t, "Plan:\n- a\n- b", 0, limits.Config{}), nil)()
	if err := s.Store.PutApproval(ctx, store.Approval{ID: "a1", RunID: rec.RunID, Tool: "bash"}); err != nil {
		t.Fatal(err)
	}
	target := wire.SubjectExec("w1")
	wnc, _ := refusals(t, s, auth.Worker, "w1")
	execs, err := wnc.SubscribeSync(target)
	if err != nil {
		t.Fatal(err)
	}
	if err := wnc.Flush(); err != nil {
		t.Fatal(err)
	}

	nc, errs := refusals(t, s, auth.Client, "eve")
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	push := jetstream.ConsumerConfig{Name: "evil", DeliverSubject: target, AckPolicy: jetstream.AckNonePolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy}
	for _, stream := range clientStreams {
		body, _ := json.Marshal(map[string]any{"stream_name": stream, "config": push})
		for _, subject := range []string{
			"$JS.API.CONSUMER.CREATE." + stream + ".evil",
			"$JS.API.CONSUMER.CREATE." + stream + ".evil.>",
			"$JS.API.CONSUMER.DURABLE.CREATE." + stream + ".evil",
		} {
			if err := nc.PublishRequest(subject, nc.NewInbox(), body); err != nil {
				t.Fatal(err)
			}
			awaitRefusal(t, errs, "raw "+subject)
		}
		// Through the library: the refused request gets no answer, so it
		// ends when the refusal has come.
		lctx, stop := context.WithCancel(ctx)
		made := make(chan error, 1)
		go func() {
			_, err := js.CreatePushConsumer(lctx, stream, push)
			made <- err
		}()
		awaitRefusal(t, errs, "jetstream CreatePushConsumer on "+stream)
		stop()
		if err := <-made; err == nil {
			t.Errorf("jetstream CreatePushConsumer on %s: made", stream)
		}
	}

	// No consumer exists, so nothing delivers; w1 has received nothing.
	cjs, err := jetstream.New(mustConn(t, s, "coordinator-view"))
	if err != nil {
		t.Fatal(err)
	}
	for _, stream := range clientStreams {
		st, err := cjs.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		if n := st.CachedInfo().State.Consumers; n != 0 {
			t.Errorf("%s has %d consumers, want 0", stream, n)
		}
	}
	if err := wnc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := execs.Pending(); n != 0 {
		t.Errorf("w1 received %d messages on %s", n, target)
	}

	// The vector is real: a coordinator's consumer delivers there.
	if _, err := cjs.CreatePushConsumer(ctx, store.EventsStream, push); err != nil {
		t.Fatal(err)
	}
	if _, err := execs.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("a coordinator's push consumer delivered nothing on %s: %v", target, err)
	}
}

// TestClientReadsWithoutConsumers: a client's store, on a client's
// credentials, follows a run's events to its end, watches its record
// until final, lists and watches approvals, reads the record and the
// journal, and leaves no consumer on any stream it read.
func TestClientReadsWithoutConsumers(t *testing.T) {
	s, cl := startSecured(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	nc, errs := refusals(t, s, auth.Client, "reader")
	st, err := store.Open(ctx, nc, store.Config{Client: true})
	if err != nil {
		t.Fatal(err)
	}
	sub := simSubmit(t, "Plan:\n- a\n- b", 50, limits.Config{})
	records, err := st.WatchRecord(ctx, sub.RunID)
	if err != nil {
		t.Fatal(err)
	}
	approvals, err := st.WatchApprovals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	followed := make(chan []event.Type, 1)
	go func() {
		var types []event.Type
		err := st.Events(ctx, sub.RunID, 0, func(_ uint64, e event.Event) error {
			types = append(types, e.Type)
			return nil
		})
		if err != nil {
			t.Errorf("Events: %v", err)
		}
		followed <- types
	}()
	rec := runAsync(t, ctx, cl, sub, nil)()
	if rec.Status != event.Succeeded {
		t.Fatalf("run: %s (%s)", rec.Status, rec.Error)
	}

	final := false
	for r := range records { // closed when ctx ends
		if final = r.Status.Final(); final {
			if r.Output != rec.Output {
				t.Errorf("watched record's output %q, want %q", r.Output, rec.Output)
			}
			break
		}
	}
	if !final {
		t.Fatal("the watched record never became final")
	}
	select {
	case types := <-followed:
		if len(types) == 0 || (types[0] != event.RunQueued && types[0] != event.RunStarted) || types[len(types)-1] != event.RunFinished {
			t.Errorf("followed events %v: want the run from its start to run.finished", types)
		}
	case <-ctx.Done():
		t.Fatal("Events did not end at run.finished")
	}
	if got, _, err := st.GetRecord(ctx, sub.RunID); err != nil || got.Status != event.Succeeded {
		t.Errorf("GetRecord: %s, %v", got.Status, err)
	}
	if _, err := st.ReadRunJournal(ctx, sub.RunID); err != nil {
		t.Errorf("ReadRunJournal: %v", err)
	}

	if err := s.Store.PutApproval(ctx, store.Approval{ID: "held", RunID: sub.RunID, Tool: "bash", RequestedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-approvals:
		if a.ID != "held" {
			t.Errorf("watched approval %+v", a)
		}
	case <-ctx.Done():
		t.Fatal("the approval was not seen by the watch")
	}
	if list, err := st.ListApprovals(ctx, true); err != nil || len(list) != 1 || list[0].ID != "held" {
		t.Errorf("ListApprovals: %+v, %v", list, err)
	}

	js, _ := jetstream.New(mustConn(t, s, "coordinator-view"))
	for _, stream := range append(clientStreams, store.JournalStream) {
		info, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		if n := info.CachedInfo().State.Consumers; n != 0 {
			t.Errorf("%s has %d consumers, want 0", stream, n)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		t.Errorf("the client's reads met %v", err)
	default:
	}
}
