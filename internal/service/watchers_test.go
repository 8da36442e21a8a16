package service_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/broker/brokertest"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/service"
	"github.com/formica-run/formica/internal/store"
)

// raiseFileLimit raises the process's open-file limit to at least n, or
// skips the test.
func raiseFileLimit(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("cannot read the open-file limit: %v", err)
	}
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		t.Skipf("needs %d open files; the hard limit is %d (raise it with ulimit -Hn)", n, lim.Max)
	}
	old := lim
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("cannot raise the open-file limit to %d: %v", n, err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// sseWatcher is one client of GET /v1/runs/{id}/events.
type sseWatcher struct {
	run   string
	after uint64
	got   []sseGot
	err   error
}

type sseGot struct {
	id  uint64
	typ event.Type
}

// read reads an event stream to its end, calling seen after each event.
func (w *sseWatcher) read(body io.Reader, seen func(n int)) error {
	rd := bufio.NewReader(body)
	var id uint64
	for {
		line, err := rd.ReadString('\n')
		if err == io.EOF && line == "" {
			return nil
		}
		if err != nil {
			return err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "id: "):
			if id, err = strconv.ParseUint(line[4:], 10, 64); err != nil {
				return err
			}
		case strings.HasPrefix(line, "data: "):
			var e event.Event
			if err := json.Unmarshal([]byte(line[6:]), &e); err != nil {
				return err
			}
			w.got = append(w.got, sseGot{id, e.Type})
			seen(len(w.got))
		}
	}
}

// TestSSEClientsShareOneFollowPerRun: 5,000 clients of the HTTP API's
// event streams over 50 running runs, against the embedded NATS server
// with its default limits, through one API server: every client gets every
// event of its run after its resume point (the stored ones, then the live
// ones), once and in order, and the stream ends with the run. The process
// follows each run with one subscription, whatever the number of its
// watchers, and the events stream has no consumer. With the ceiling at
// 5,000 streams, a 5,001st client is refused at once: 503 with
// Retry-After.
func TestSSEClientsShareOneFollowPerRun(t *testing.T) {
	if testing.Short() {
		t.Skip("5,000 HTTP clients: not in -short")
	}
	const (
		clients = 5000
		runs    = 50
	)
	// A client's socket and the server's, and some to spare.
	raiseFileLimit(t, 2*clients+1024)
	srv := brokertest.Start(t)
	nc, err := srv.Connect("api")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := store.Open(ctx, nc, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(service.Config{Conn: nc, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	a, err := api.New(api.Config{Addr: "127.0.0.1:0", MaxStreams: clients}, svc)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Shutdown(sctx)
	})
	base := "http://" + a.Addr()

	// Each run is running, with three batches of events stored.
	runID := func(r int) string { return fmt.Sprintf("run-%02d", r) }
	appendBatch := func(run string, types ...event.Type) {
		var batch []byte
		for _, typ := range types {
			line, err := event.Marshal(event.Event{Type: typ, RunID: run, ThreadID: "t1", Name: "helper", Time: time.Now().UTC()})
			if err != nil {
				t.Fatal(err)
			}
			batch = append(append(batch, line...), '\n')
		}
		f, err := st.AppendEvents(run, batch)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.WaitStored(ctx, []jetstream.PubAckFuture{f}); err != nil {
			t.Fatal(err)
		}
	}
	for r := range runs {
		if _, err := st.CreateRecord(ctx, record.Run{RunID: runID(r), Status: event.Running, Task: "watch me", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		appendBatch(runID(r), event.RunStarted)
		appendBatch(runID(r), event.ThreadSpawned, event.ThreadStarted)
		appendBatch(runID(r), event.ModelCall)
	}
	history := make([][]sseGot, runs)
	for r := range runs {
		if err := st.Replay(ctx, runID(r), 0, func(id uint64, e event.Event) error {
			history[r] = append(history[r], sseGot{id, e.Type})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	// Clients watch run i%50; every fourth resumes after the run's second
	// event (within a stored batch), the others read from the start.
	tr := &http.Transport{MaxConnsPerHost: clients + 16, MaxIdleConnsPerHost: 16, DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	watchers := make([]*sseWatcher, clients)
	var joined, ended sync.WaitGroup
	dials := make(chan struct{}, 256) // connections being opened at once
	start := time.Now()
	for i := range clients {
		r := i % runs
		w := &sseWatcher{run: runID(r)}
		stored := len(history[r])
		if i%4 == 0 {
			w.after, stored = history[r][1].id, stored-2
		}
		watchers[i] = w
		joined.Add(1)
		ended.Add(1)
		go func() {
			defer ended.Done()
			once := sync.OnceFunc(joined.Done)
			defer once()
			dials <- struct{}{}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/runs/"+w.run+"/events", nil)
			if w.after != 0 {
				req.Header.Set("Last-Event-ID", strconv.FormatUint(w.after, 10))
			}
			resp, err := hc.Do(req)
			<-dials
			if err != nil {
				w.err = err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				w.err = fmt.Errorf("status %d", resp.StatusCode)
				return
			}
			// A client that has its run's stored events has joined the
			// run's feed (it joins before it reads the store).
			w.err = w.read(resp.Body, func(n int) {
				if n == stored {
					once()
				}
			})
		}()
	}
	waitGroup(t, ctx, &joined, "every client to get its run's stored events")
	t.Logf("%d clients connected and replayed in %v", clients, time.Since(start).Round(time.Millisecond))
	for i, w := range watchers {
		if w.err != nil {
			t.Fatalf("client %d (%s): %v", i, w.run, w.err)
		}
	}

	// One subscription per run, whatever the number of its watchers; no
	// consumer on the events stream.
	if n := svc.Following(); n != runs {
		t.Errorf("the service follows %d runs, want %d", n, runs)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for r := range runs {
		sz, err := srv.NATS().Subsz(&server.SubszOptions{Subscriptions: true, Test: "formica.stored.events." + runID(r)})
		if err != nil {
			t.Fatal(err)
		}
		if sz.Total != 1 {
			t.Fatalf("%d subscriptions follow %s for its %d watchers, want 1", sz.Total, runID(r), clients/runs)
		}
	}
	consumers := func(when string) {
		t.Helper()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		s, err := js.Stream(ctx, store.EventsStream)
		if err != nil {
			t.Fatal(err)
		}
		if n := s.CachedInfo().State.Consumers; n != 0 {
			t.Fatalf("%s: %d consumers on %s, want 0", when, n, store.EventsStream)
		}
	}
	consumers("with 5,000 clients following")

	// Client 5,001 is refused at once: 503 with Retry-After, never a 200.
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	req, _ := http.NewRequestWithContext(rctx, http.MethodGet, base+"/v1/runs/"+runID(0)+"/events", nil)
	refusedAt := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("client %d: %v", clients+1, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	rcancel()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("client %d: status %d, Retry-After %q, body %s; want 503 with Retry-After", clients+1, resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	t.Logf("client %d refused in %v: %s", clients+1, time.Since(refusedAt).Round(time.Microsecond), strings.TrimSpace(string(body)))

	// The runs go on and end; every client gets the live events.
	live := time.Now()
	for r := range runs {
		appendBatch(runID(r), event.ToolCall, event.ToolResult)
	}
	for r := range runs {
		appendBatch(runID(r), event.ThreadFinished)
	}
	for r := range runs {
		appendBatch(runID(r), event.RunFinished)
	}
	waitGroup(t, ctx, &ended, "every stream to end with its run")
	t.Logf("live events of %d runs reached %d clients, streams ended, in %v", runs, clients, time.Since(live).Round(time.Millisecond))

	for r := range runs {
		history[r] = history[r][:0]
		if err := st.Replay(ctx, runID(r), 0, func(id uint64, e event.Event) error {
			history[r] = append(history[r], sseGot{id, e.Type})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range watchers {
		if w.err != nil {
			t.Fatalf("client %d (%s): %v", i, w.run, w.err)
		}
		want := history[i%runs]
		for len(want) > 0 && want[0].id <= w.after {
			want = want[1:]
		}
		wantN := 8 // 4 stored, 4 live
		if w.after != 0 {
			wantN = 6
		}
		if len(want) != wantN || len(w.got) != len(want) {
			t.Fatalf("client %d (%s, after %d): got %v, want %v", i, w.run, w.after, w.got, want)
		}
		for k := range want {
			if w.got[k] != want[k] {
				t.Fatalf("client %d (%s, after %d): event %d is %v, want %v", i, w.run, w.after, k, w.got[k], want[k])
			}
		}
	}
	if n := svc.Following(); n != 0 {
		t.Errorf("the service still follows %d runs after they ended", n)
	}
	consumers("after the runs ended")
}

// waitGroup waits for wg, or fails t when ctx ends first.
func waitGroup(t *testing.T, ctx context.Context, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("waiting for %s: %v", what, errors.Join(ctx.Err(), context.Cause(ctx)))
	}
}
