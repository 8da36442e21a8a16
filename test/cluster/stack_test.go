package cluster_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/wire"
	tproc "github.com/formica-run/formica/test/proc"
)

// stack is one coordinator process with its embedded NATS server, the
// workers started on it, and the test's own connection watching events and
// worker heartbeats.
type stack struct {
	t      *testing.T
	id     string
	url    string
	coord  *proc
	nc     *nats.Conn
	events *eventLog
	hb     *heartbeats
}

// startStack starts a coordinator with id listening on a free loopback port.
func startStack(t *testing.T, id string) *stack {
	t.Helper()
	s := &stack{t: t, id: id}
	s.coord, s.url = startCoordinator(t, id)
	s.nc = connect(t, s.url)
	s.events = watchEvents(t, s.nc)
	s.hb = watchHeartbeats(t, s.nc)
	return s
}

// startCoordinator starts a coordinator with its own NATS server, choosing
// the port again if another process took it between reservation and
// listen.
func startCoordinator(t *testing.T, id string, extra ...string) (*proc, string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		port := freePorts(t, 1)[0]
		dir := t.TempDir()
		args := append([]string{"--id", id, "--nats-listen", fmt.Sprintf("127.0.0.1:%d", port),
			"--data-dir", dir, "--heartbeat", coordHeartbeat, "--http", "off", "--allow-scripted",
			"--cwd", os.TempDir()}, extra...) // runs name t.TempDir()s as their --cwd
		p := start(t, "coordinator "+id, bin.coordinator, args...)
		if waitReady(t, p, "coordinator ready") {
			dataDirs.Store(natsURL(port), dir)
			return p, natsURL(port)
		}
		if attempt == 3 || !strings.Contains(p.stderr.String(), "address already in use") {
			t.Fatalf("coordinator %s did not start (%s)", id, p.status())
		}
		t.Logf("coordinator %s: port %d was taken, trying another", id, port)
	}
}

// dataDirs maps the NATS URL of each coordinator startCoordinator started
// to its data dir, whose authority issues the credentials of its clients.
var dataDirs sync.Map

// credsFlag is --nats-creds with credentials of role under id for the
// coordinator at url, or nothing for a server without authentication.
func credsFlag(t *testing.T, url, role, id string) []string {
	t.Helper()
	dir, ok := dataDirs.Load(url)
	if !ok {
		return nil
	}
	return []string{"--nats-creds", tproc.Creds(t, bin.coordinator, dir.(string), role, id)}
}

// waitReady waits for a process's ready line; false if it exited first.
func waitReady(t *testing.T, p *proc, line string) bool {
	t.Helper()
	return waitReadyWithin(t, p, line, readyTimeout)
}

func waitReadyWithin(t *testing.T, p *proc, line string, timeout time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.stderr.String(), line) {
		if p.exited() {
			return false
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not log %q within %v", p.name, line, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// startWorker starts a worker process and waits until its heartbeats are on
// the wire (so the coordinator has registered it). extra flags come last and
// win, e.g. a faster --heartbeat.
func (s *stack) startWorker(id string, slots int, extra ...string) *proc {
	s.t.Helper()
	args := append([]string{"--nats", s.url, "--id", id, "--slots", strconv.Itoa(slots),
		"--heartbeat", workerHeartbeat, "--allow-scripted"}, credsFlag(s.t, s.url, "worker", id)...)
	args = append(args, extra...)
	p := start(s.t, "worker "+id, bin.worker, args...)
	p.waitLog(s.t, "worker ready", readyTimeout)
	s.hb.waitSeen(s.t, id, 2)
	return p
}

func connect(t *testing.T, urls ...string) *nats.Conn {
	t.Helper()
	opts := []nats.Option{nats.Name("cluster-test"), nats.MaxReconnects(-1)}
	if f := credsFlag(t, urls[0], "coordinator", "test"); f != nil {
		opts = append(opts, nats.UserCredentials(f[1]))
	}
	nc, err := nats.Connect(strings.Join(urls, ","), opts...)
	if err != nil {
		t.Fatalf("connect to %v: %v", urls, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// run starts `formica run --nats URL --json` with args.
func (s *stack) run(args ...string) *proc {
	s.t.Helper()
	return startRun(s.t, s.url, args...)
}

func startRun(t *testing.T, url string, args ...string) *proc {
	t.Helper()
	full := append([]string{"run", "--nats", url, "--json", "--cwd", t.TempDir()}, credsFlag(t, url, "client", "cli")...)
	full = append(full, args...)
	return start(t, "formica run", bin.formica, full...)
}

// result waits for a `formica run --json` to end and decodes its record.
func result(t *testing.T, p *proc) (int, record.Run) {
	t.Helper()
	code := p.wait(t, runTimeout)
	var rec record.Run
	if err := json.Unmarshal([]byte(p.stdout.String()), &rec); err != nil {
		t.Fatalf("formica run exited %d; stdout is not a run record: %v\nstdout: %s", code, err, p.stdout.String())
	}
	return code, rec
}

// succeeded waits for a run and fails the test unless it succeeded.
func succeeded(t *testing.T, p *proc) record.Run {
	t.Helper()
	code, rec := result(t, p)
	if code != 0 || rec.Status != event.Succeeded {
		t.Fatalf("run exited %d with status %q, error %q", code, rec.Status, rec.Error)
	}
	return rec
}

// simAgent writes an agent spec running the sim model with latencyMS per
// model call; helpers inherit both.
func simAgent(t *testing.T, latencyMS int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.yaml")
	spec := fmt.Sprintf("name: formica\nmodel: sim\nmodel_args: {latency_ms: %d}\ntools: [agent]\n", latencyMS)
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// eventLog keeps every event published in the cluster, in arrival order.
type eventLog struct {
	mu     sync.Mutex
	events []event.Event
}

func watchEvents(t *testing.T, nc *nats.Conn) *eventLog {
	t.Helper()
	l := &eventLog{}
	sub, err := nc.Subscribe(wire.EventsAll, func(m *nats.Msg) {
		e, err := event.Unmarshal(m.Data)
		if err != nil {
			return // not t.Errorf: this may run after the test has ended
		}
		l.mu.Lock()
		l.events = append(l.events, e)
		l.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	sub.SetPendingLimits(-1, -1)
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *eventLog) all() []event.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]event.Event(nil), l.events...)
}

// wait waits until some event satisfies match and returns the first that does.
func (l *eventLog) wait(t *testing.T, timeout time.Duration, what string, match func(event.Event) bool) event.Event {
	t.Helper()
	var found event.Event
	waitUntil(t, timeout, what, func() bool {
		for _, e := range l.all() {
			if match(e) {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

// heartbeats keeps the latest heartbeat of every worker and how many were seen.
type heartbeats struct {
	mu     sync.Mutex
	latest map[string]wire.WorkerHeartbeat
	seen   map[string]int
}

func watchHeartbeats(t *testing.T, nc *nats.Conn) *heartbeats {
	t.Helper()
	h := &heartbeats{latest: map[string]wire.WorkerHeartbeat{}, seen: map[string]int{}}
	_, err := nc.Subscribe(wire.SubjectWorkerHeartbeats, func(m *nats.Msg) {
		var hb wire.WorkerHeartbeat
		if wire.DecodeAs(m.Data, wire.TypeWorkerHeartbeat, &hb) != nil {
			return
		}
		h.mu.Lock()
		h.latest[hb.ID] = hb
		h.seen[hb.ID]++
		h.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return h
}

// waitSeen waits until n heartbeats of worker id have arrived.
func (h *heartbeats) waitSeen(t *testing.T, id string, n int) {
	t.Helper()
	waitUntil(t, readyTimeout, fmt.Sprintf("worker %s has sent %d heartbeats", id, n), func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.seen[id] >= n
	})
}

// waitIdle waits until each of ids has sent, after this call, a heartbeat
// saying it runs and parks no thread.
func (h *heartbeats) waitIdle(t *testing.T, timeout time.Duration, ids ...string) {
	t.Helper()
	h.mu.Lock()
	base := map[string]int{}
	for _, id := range ids {
		base[id] = h.seen[id]
	}
	h.mu.Unlock()
	idle := func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, id := range ids {
			hb := h.latest[id]
			if h.seen[id] <= base[id] || hb.Running != 0 || hb.Parked != 0 {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(timeout)
	for !idle() {
		if time.Now().After(deadline) {
			t.Fatalf("workers %v still report threads after %v: %s", ids, timeout, h)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *heartbeats) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for id, hb := range h.latest {
		fmt.Fprintf(&b, "%s: running %d parked %d slots %d; ", id, hb.Running, hb.Parked, hb.Slots)
	}
	return b.String()
}
