package embedded

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/coordinator"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/oneshot"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/wire"
)

// startSecured starts a durable stack whose server trusts an in-memory
// authority: every component connects with its own role's credentials.
func startSecured(t *testing.T) (*Stack, *oneshot.Client) {
	t.Helper()
	return startSecuredWith(t, nil)
}

// startSecuredWith is startSecured with its Config changed by change.
func startSecuredWith(t *testing.T, change func(*Config)) (*Stack, *oneshot.Client) {
	t.Helper()
	a, err := auth.NewEphemeral()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Workers: 2, Slots: 4, Authority: a, Durable: true,
		// The default heartbeat: these tests are about credentials and large
		// bodies, and a 1.5 MiB body under -race on a loaded machine can
		// hold a coordinator's heartbeat past a short loss window.
		Server: brokerDurable(t), Models: runner.ModelOpenerFunc(providers.Open), HeartbeatInterval: time.Second,
		AllowScripted: true, Coordinator: coordinator.Config{Cwd: os.TempDir(), AllowScripted: true}}
	if change != nil {
		change(&cfg)
	}
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	nc, err := s.ConnectAs(auth.Client, "tester", "tester")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), nc, store.Config{Client: true})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := oneshot.New(nc, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return s, cl
}

// TestSecuredStackRuns: with every role on its own credentials, a fan-out
// run goes through spawns, events and results as before.
func TestSecuredStackRuns(t *testing.T) {
	_, cl := startSecured(t)
	sub := simSubmit(t, "Plan:\n- a\n  - a1\n- b", 10, limits.Config{})
	rec := runAsync(t, context.Background(), cl, sub, nil)()
	if want := "a: a1: done: a1\nb: done: b"; rec.Status != event.Succeeded || rec.Output != want {
		t.Fatalf("run: %s %q, output %q", rec.Status, rec.Error, rec.Output)
	}
}

// TestSecuredStackLargeBodies: local workers on their own credentials
// pass bodies over the NATS max payload both ways: a root (scripted) hands
// a helper (sim) a 1.5 MiB task, whose answer, as large, is the tool
// result the root's transcript holds.
func TestSecuredStackLargeBodies(t *testing.T) {
	s, cl := startSecured(t)
	runLargeBodies(t, s, cl)
}

// runLargeBodies runs a root (scripted) that hands a helper (sim) a 1.5 MiB
// task, whose answer, as large, comes back as its tool result, checks that
// the root's journal holds it whole, and returns the run's record.
func runLargeBodies(t *testing.T, s *Stack, cl *oneshot.Client) record.Run {
	t.Helper()
	big := "TASK-" + strings.Repeat("0123456789abcdef", (3<<19)/16) + "-END"
	script := filepath.Join(t.TempDir(), "root.yaml")
	if err := os.WriteFile(script, []byte("responses:\n  - tool_calls: [{name: agent, arguments: {name: huge, task: "+big+"}}]\n  - text: handed over\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sub := simSubmit(t, "Hand it over", 10, limits.Config{})
	sub.Agent.Model = "scripted:" + script
	sub.Agent.Helper.Model = "sim"
	rec := runAsync(t, context.Background(), cl, sub, nil)()
	if rec.Status != event.Succeeded || rec.Output != "handed over" {
		t.Fatalf("run: %s %q, output %q", rec.Status, rec.Error, rec.Output)
	}
	entries, err := s.Store.ReadJournal(context.Background(), sub.RunID, journal.RootID(sub.RunID))
	if err != nil {
		t.Fatal(err)
	}
	var got bool
	for _, e := range entries {
		got = got || e.Result == "done: "+big
	}
	if !got {
		t.Errorf("the root's journal (%d entries) holds no tool result with the helper's whole answer", len(entries))
	}
	return rec
}

// violations connects as role/id and collects the permission violations
// the server reports.
func violations(t *testing.T, s *Stack, role auth.Role, id string) (*nats.Conn, func() []string) {
	t.Helper()
	a := s.authority
	creds, err := a.Issue(role, id)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	opts := append(creds.Options(), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		mu.Lock()
		got = append(got, err.Error())
		mu.Unlock()
	}))
	nc, err := s.Server.Connect("attacker-"+id, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, func() []string {
		nc.Flush()
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// TestWorkerCredentialsArePinned: a worker's credentials cannot subscribe to
// another worker's subjects, speak on another worker's subjects, publish
// run events, touch the records and approvals buckets, read, write, delete
// or purge another party's bodies in the transfers stream (nor its own:
// coordinators delete), or make, change or delete a stream, nor follow
// what clients follow; a client's cannot publish exec requests, spawns or events, nor
// write the records or approvals buckets, the queue or the run index, nor
// create a consumer, nor subscribe to the streams' own subjects, nor read
// another client's inbox (where its approvals are asked).
func TestWorkerCredentialsArePinned(t *testing.T) {
	s, _ := startSecured(t)
	victim := s.Workers[0].ID()
	nc, seen := violations(t, s, auth.Worker, "mallory")
	mine, theirs := store.WorkerPlace("mallory"), store.WorkerPlace(victim)
	direct := "$JS.API.DIRECT.GET." + store.TransfersStream

	workerSubDenied := append([]string{wire.SubjectExec(victim), "formica.worker." + victim + ".>", "formica.approver.*", wire.ClientInboxPrefix + ">", wire.EventsAll + "x", ">"},
		store.StoredSubjects...) // what clients follow: no business of a worker's
	for _, subj := range workerSubDenied {
		if _, err := nc.SubscribeSync(subj); err != nil {
			t.Fatal(err)
		}
	}
	workerPubDenied := []string{
		wire.SubjectExec(victim), wire.SubjectWorkerHeartbeat(victim), wire.SubjectSpawn(s.Coordinator.ID(), victim),
		wire.SubjectQuota(s.Coordinator.ID(), victim), // another's quota asks: its shares to end or hold
		wire.SubjectEvents("r1") + ".run.finished", store.SubjectEventLog("r1"), "$KV." + store.RunsBucket + ".r1", "$KV." + store.ApprovalsBucket + ".a1",
		"$JS.API.STREAM.DELETE." + store.EventsStream, "$JS.API.STREAM.PURGE.KV_" + store.RunsBucket, wire.SubjectSubmit,
		// A consumer of what it wrote, delivering onto another's subject.
		"$JS.API.CONSUMER.CREATE." + store.TransfersStream + ".c1",
		"$JS.API.CONSUMER.CREATE." + store.TransfersStream + ".c1." + mine + ".>",
		// Another's bodies, the victim's (written or sent to it) and the
		// coordinators': written over, read (by subject, by wildcards over
		// every place, in batches, by sequence), listed, deleted or purged;
		// its own place read (the server would answer on any subject the
		// asker names) or the place it is sent bodies written (then read);
		// its own bodies neither deleted nor purged (the APIs name no
		// subject); the stream made, reconfigured or deleted.
		theirs + ".x.0", store.ToWorkerPlace(victim) + ".x.0", store.CoordinatorsPlace + ".x.0", store.ToWorkerPlace("mallory") + ".x.0",
		"formica.transfers.from.*.x.0", "formica.transfers.>",
		direct + "." + theirs + ".x.0", direct + "." + store.ToWorkerPlace(victim) + ".x.0", direct + "." + store.CoordinatorsPlace + ".x.0",
		direct + "." + mine + ".x.0", direct + ".formica.transfers.to.*.x.0", direct + ".formica.transfers.>", direct + ".formica.transfers.*.*.x.0", direct,
		"$JS.API.STREAM.MSG.GET." + store.TransfersStream, "$JS.API.STREAM.INFO." + store.TransfersStream,
		"$JS.API.STREAM.PURGE." + store.TransfersStream, "$JS.API.STREAM.MSG.DELETE." + store.TransfersStream,
		"$JS.API.STREAM.CREATE." + store.TransfersStream, "$JS.API.STREAM.UPDATE." + store.TransfersStream,
		"$JS.API.STREAM.DELETE." + store.TransfersStream,
		// Nor the buckets of an earlier version.
		"$O.formica_transfers_w_mallory.C.x", "$JS.API.DIRECT.GET.OBJ_formica_transfers",
	}
	for _, subj := range workerPubDenied {
		if err := nc.Publish(subj, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	want := len(workerSubDenied) + len(workerPubDenied)
	for len(seen()) < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := seen()
	for _, e := range got {
		if !strings.Contains(strings.ToLower(e), "permissions violation") {
			t.Errorf("unexpected error %q", e)
		}
	}
	if len(got) != want {
		t.Errorf("%d permission violations, want %d:\n%s", len(got), want, strings.Join(got, "\n"))
	}

	cnc, cseen := violations(t, s, auth.Client, "eve")
	clientDenied := []string{wire.SubjectExec(victim), wire.SubjectSpawn(s.Coordinator.ID(), victim), wire.SubjectEvents("r1") + ".run.finished",
		store.SubjectEventLog("r1"),
		"$KV." + store.ApprovalsBucket + ".a1",
		// Records, the queue and the index have the coordinators as their
		// only writers; the cancel requests are appended, never deleted
		// nor read through a consumer (which would republish them).
		"$KV." + store.RunsBucket + ".r1", store.SubjectQueue, store.SubjectIndex,
		"$JS.API.STREAM.MSG.DELETE.KV_" + store.RunsBucket, "$JS.API.STREAM.PURGE.KV_" + store.RunsBucket,
		"$JS.API.STREAM.PURGE." + store.CancelsStream, "$JS.API.CONSUMER.CREATE." + store.CancelsStream + ".c1",
		"$JS.API.CONSUMER.DELETE." + store.QueueStream + "." + store.QueueConsumer, "$JS.ACK." + store.QueueStream + ".>",
		"$JS.API.STREAM.CREATE.x", "formica.anything",
		"$JS.API.CONSUMER.CREATE." + store.TransfersStream + ".c1", "$JS.API.CONSUMER.CREATE.OBJ_" + store.PayloadsBucket + ".c1",
		// The journal's thread entries are workers': read by direct gets.
		"$JS.API.CONSUMER.CREATE." + store.JournalStream + ".c1", "$JS.API.CONSUMER.CREATE." + store.JournalStream + ".c1.formica.journal.r1.>",
		// No consumer at all, even of what coordinators write (see
		// TestClientsCreateNoConsumers), so no flow control either.
		"$JS.API.CONSUMER.CREATE." + store.EventsStream + ".c1", "$JS.API.CONSUMER.CREATE.KV_" + store.RunsBucket + ".c1",
		"$JS.API.CONSUMER.CREATE.KV_" + store.ApprovalsBucket + ".c1", "$JS.API.CONSUMER.MSG.NEXT." + store.EventsStream + ".c1",
		"$JS.FC." + store.EventsStream + ".x"}
	for _, subj := range clientDenied {
		if err := cnc.Publish(subj, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	// Nor the streams' own subjects, whose messages carry their writer's
	// reply subject (a client may answer what it receives): it follows
	// their republished copies, which carry none.
	clientSubDenied := []string{"formica.approver.*", wire.ClientInboxPrefix + "alice.>", store.SubjectCancels,
		store.SubjectEventLogAll, "$KV." + store.RunsBucket + ".>", "$KV." + store.ApprovalsBucket + ".>"}
	for _, subj := range clientSubDenied {
		if _, err := cnc.SubscribeSync(subj); err != nil {
			t.Fatal(err)
		}
	}
	cwant := len(clientDenied) + len(clientSubDenied)
	for len(cseen()) < cwant && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := cseen(); len(got) != cwant {
		t.Errorf("client: %d permission violations, want %d:\n%s", len(got), cwant, strings.Join(got, "\n"))
	}
}

func brokerDurable(t *testing.T) broker.ServerConfig {
	return broker.ServerConfig{DataDir: t.TempDir(), JetStream: true}
}
