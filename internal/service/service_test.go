package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/coordinator"
	"github.com/formica-run/formica/internal/embedded"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/runner"
	"github.com/formica-run/formica/internal/service"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/store"
	"github.com/nats-io/nats.go"
)

// waitTimeout bounds every wait of these tests.
const waitTimeout = 60 * time.Second

// secured starts a durable stack on a secured server (one run at a time,
// at most 20 live helpers per run) and a service on a client's credentials.
func secured(t *testing.T) (*embedded.Stack, *service.Service, *store.Store) {
	t.Helper()
	a, err := auth.NewEphemeral()
	if err != nil {
		t.Fatal(err)
	}
	s, err := embedded.Start(context.Background(), embedded.Config{Workers: 1, Slots: 8, Authority: a, Durable: true,
		Server: broker.ServerConfig{DataDir: t.TempDir(), JetStream: true}, Models: runner.ModelOpenerFunc(providers.Open),
		HeartbeatInterval: 200 * time.Millisecond, Store: store.Config{AckWait: time.Second},
		Coordinator: coordinator.Config{ID: "c1", MaxRuns: 1, Cwd: t.TempDir(), Ceilings: limits.Ceilings{MaxThreads: 20}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	nc, err := s.ConnectAs(auth.Client, "tester", "tester")
	if err != nil {
		t.Fatal(err)
	}
	st, svc := openService(t, nc, store.Config{Client: true})
	return s, svc, st
}

// openService opens the store on nc as cfg says, and a service over it,
// closed when the test ends.
func openService(t *testing.T, nc *nats.Conn, cfg store.Config) (*store.Store, *service.Service) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	st, err := store.Open(ctx, nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(service.Config{Conn: nc, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	return st, svc
}

// simRun asks for a run of the default agent on the sim model, each model
// call taking latencyMS.
func simRun(id, task string, latencyMS int) api.SubmitRequest {
	a := spec.Default().Agent
	a.Model = providers.Sim
	a.ModelArgs = map[string]any{"latency_ms": latencyMS}
	return api.SubmitRequest{ID: id, Task: task, Agent: &a}
}

// waitRecord watches run id's record until done says so.
func waitRecord(t *testing.T, st *store.Store, id string, done func(record.Run) bool) record.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ch, err := st.WatchRecord(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var last record.Run
	for r := range ch {
		if last = r; done(r) {
			return r
		}
	}
	t.Fatalf("run %s: still %s (%s) after %v", id, last.Status, last.Error, waitTimeout)
	return last
}

func final(r record.Run) bool { return r.Status.Final() }

// TestRequestsGoThroughTheCoordinator: a client's submit, cancel and resume
// are requests a coordinator answers and acts on, with the coordinator's
// own ceilings and the API's errors; a queued run cancelled before it
// starts never starts, and once resumed it runs.
func TestRequestsGoThroughTheCoordinator(t *testing.T) {
	_, svc, st := secured(t)
	ctx := context.Background()

	id, err := svc.Submit(ctx, simRun("ok-1", "Plan:\n- a\n- b", 0))
	if err != nil || id != "ok-1" {
		t.Fatalf("submit: %q, %v", id, err)
	}
	if r := waitRecord(t, st, id, final); r.Status != event.Succeeded || r.Output != "a: done: a\nb: done: b" {
		t.Fatalf("run %s: %s (%s) %q", id, r.Status, r.Error, r.Output)
	}

	// The client knows only the default ceilings; the coordinator's own
	// refuses the run before anything is queued.
	wide := simRun("wide-1", "x", 0)
	wide.MaxThreads = 100
	if _, err := svc.Submit(ctx, wide); !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "agent_max_threads 100 is above the ceiling of 20") {
		t.Errorf("submit past the coordinator's ceiling: %v, want invalid naming the ceiling", err)
	}
	if _, err := svc.GetRun(ctx, "wide-1"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("a refused submission has a record: %v", err)
	}
	if _, err := svc.Submit(ctx, simRun("ok-1", "another task", 0)); !errors.Is(err, api.ErrConflict) || !errors.Is(err, store.ErrIDTaken) ||
		err.Error() != "run id ok-1 already used by a different submission" {
		t.Errorf("same id, other task: %v, want the id taken", err)
	}
	for _, tc := range []struct {
		name string
		err  error
		want error
		text string
	}{
		{"resume a missing run", svc.ResumeRun(ctx, "missing-1"), api.ErrNotFound, "run missing-1 not found"},
		{"resume a succeeded run", svc.ResumeRun(ctx, "ok-1"), api.ErrConflict, "run ok-1 is succeeded; only failed or cancelled runs resume"},
		{"cancel a succeeded run", svc.CancelRun(ctx, "ok-1"), api.ErrConflict, "run ok-1 already succeeded"},
		{"cancel a missing run", svc.CancelRun(ctx, "missing-1"), api.ErrNotFound, "run missing-1 not found"},
	} {
		if !errors.Is(tc.err, tc.want) || tc.err.Error() != tc.text {
			t.Errorf("%s: %v, want %v %q", tc.name, tc.err, tc.want, tc.text)
		}
	}

	// One run at a time: the second waits in the queue, and a cancel ends
	// it there.
	if _, err := svc.Submit(ctx, simRun("slow-1", "Slowly:\n- a", 2000)); err != nil {
		t.Fatal(err)
	}
	waitRecord(t, st, "slow-1", func(r record.Run) bool { return r.Status == event.Running })
	if _, err := svc.Submit(ctx, simRun("later-1", "Later:\n- b", 0)); err != nil {
		t.Fatal(err)
	}
	if err := svc.CancelRun(ctx, "later-1"); err != nil {
		t.Fatalf("cancel a queued run: %v", err)
	}
	if r, err := svc.GetRun(ctx, "later-1"); err != nil || r.Status != event.Cancelled || r.Error != "cancelled before it started" {
		t.Errorf("the queued run after its cancel: %s (%s), %v", r.Status, r.Error, err)
	}
	if err := svc.CancelRun(ctx, "slow-1"); err != nil {
		t.Fatalf("cancel a running run: %v", err)
	}
	if r := waitRecord(t, st, "slow-1", final); r.Status != event.Cancelled {
		t.Errorf("the running run after its cancel: %s (%s)", r.Status, r.Error)
	}
	// Its cancel request counts for the execution it was asked for, not
	// for the resume.
	if err := svc.ResumeRun(ctx, "later-1"); err != nil {
		t.Fatalf("resume the cancelled run: %v", err)
	}
	if r := waitRecord(t, st, "later-1", final); r.Status != event.Succeeded || r.Output != "b: done: b" || r.Resumes != 1 {
		t.Errorf("the resumed run: %s (%s) %q, %d resumes", r.Status, r.Error, r.Output, r.Resumes)
	}
}

// TestCancelWhileNoCoordinatorRuns: with no coordinator up, a submission
// is refused as unavailable and nothing is queued; a cancel is kept as the
// client's request (the record untouched, GetRun and ListRuns show it), and the
// coordinator that next picks the run up ends it cancelled.
func TestCancelWhileNoCoordinatorRuns(t *testing.T) {
	s, svc, st := secured(t)
	ctx := context.Background()
	if _, err := svc.Submit(ctx, simRun("held-1", "Slowly:\n- a", 5000)); err != nil {
		t.Fatal(err)
	}
	waitRecord(t, st, "held-1", func(r record.Run) bool { return r.Status == event.Running })
	// Stopping hands the run back to the queue for the next coordinator.
	if err := s.Coordinator.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Submit(ctx, simRun("lost-1", "x", 0)); !errors.Is(err, api.ErrUnavailable) || !strings.Contains(err.Error(), "no coordinator is running to queue the run: nothing was queued") {
		t.Errorf("submit with no coordinator: %v, want unavailable", err)
	}
	if err := svc.ResumeRun(ctx, "held-1"); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("resume with no coordinator: %v, want unavailable", err)
	}
	if err := svc.CancelRun(ctx, "held-1"); err != nil {
		t.Fatalf("cancel with no coordinator: %v", err)
	}
	stored, _, err := st.GetRecord(ctx, "held-1")
	if err != nil || stored.Status.Final() || stored.CancelRequested != "" {
		t.Fatalf("the stored record after the cancel: %s %q, %v; want it as the coordinator left it", stored.Status, stored.CancelRequested, err)
	}
	shown, err := svc.GetRun(ctx, "held-1")
	if err != nil || shown.Status.Final() || shown.CancelRequested != coordinator.CancelledByUser {
		t.Fatalf("GetRun after the cancel: %s, cancel_requested %q, %v", shown.Status, shown.CancelRequested, err)
	}
	listed, _, err := svc.ListRuns(ctx, "", 100, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range listed {
		if r.RunID == "held-1" && r.CancelRequested != coordinator.CancelledByUser {
			t.Errorf("ListRuns after the cancel: held-1 with cancel_requested %q, want it as GetRun shows it", r.CancelRequested)
		}
	}
	if len(listed) != 1 || listed[0].RunID != "held-1" {
		t.Errorf("ListRuns: %d runs, want held-1 alone", len(listed))
	}
	if _, err := svc.GetRun(ctx, "lost-1"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("the refused submission has a record: %v", err)
	}

	// The next coordinator honours the kept request without starting the run.
	nc, err := s.ConnectAs(auth.Coordinator, "c2", "c2")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	cst, err := store.Open(sctx, nc, store.Config{AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := coordinator.New(coordinator.Config{ID: "c2", Conn: nc, Store: cst, Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Start(sctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c2.Stop() })
	r := waitRecord(t, st, "held-1", final)
	if r.Status != event.Cancelled || r.Error != coordinator.CancelledByUser || r.Attempts != 1 {
		t.Errorf("held-1: %s (%s), %d attempts; want cancelled by a user, never started again", r.Status, r.Error, r.Attempts)
	}
}

// TestJournalsReadByDirectGets: a client's credentials may create no
// consumer of the journal (its thread entries are workers'), and read a
// run's threads and transcripts all the same, by direct gets.
func TestJournalsReadByDirectGets(t *testing.T) {
	_, svc, st := secured(t)
	ctx := context.Background()
	if _, err := svc.Submit(ctx, simRun("read-1", "Plan:\n- a\n- b", 0)); err != nil {
		t.Fatal(err)
	}
	if r := waitRecord(t, st, "read-1", final); r.Status != event.Succeeded {
		t.Fatalf("run: %s (%s)", r.Status, r.Error)
	}
	threads, err := svc.Threads(ctx, "read-1")
	if err != nil || len(threads) != 3 {
		t.Fatalf("threads: %d, %v; want the root and two helpers", len(threads), err)
	}
	tr, err := svc.Transcript(ctx, "read-1", journal.RootID("read-1"))
	if err != nil || tr.Status != event.Succeeded || tr.Output != "a: done: a\nb: done: b" || len(tr.Messages) == 0 {
		t.Fatalf("root transcript: %s %q, %d messages, %v", tr.Status, tr.Output, len(tr.Messages), err)
	}
}
