package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/test/proc"
)

// A worker started before its NATS server keeps trying, says so, answers
// /healthz but not /readyz meanwhile, and connects and becomes ready once
// the server is up. Everything is configured from the environment.
func TestWorkerStartedBeforeNATS(t *testing.T) {
	ports := proc.FreePorts(t, 3)
	natsURL, httpAddr := proc.NATSURL(ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	// The worker's credentials come from the coordinator's data dir before
	// either process runs.
	dataDir := t.TempDir()
	creds := filepath.Join(t.TempDir(), "early.creds")
	issue := proc.Start(t, "coordinator creds", bin.coordinator, "creds", "--data-dir", dataDir, "--role", "worker", "--id", "early", "--out", creds)
	if code := issue.Wait(t, startTimeout); code != 0 {
		t.Fatalf("coordinator creds: exit %d", code)
	}
	w := workerOn(t, "early", natsURL, "FORMICA_HTTP="+httpAddr, "FORMICA_NATS_CREDS="+creds)
	w.WaitLog(t, "nats not reachable yet, retrying", startTimeout)

	check := func(args ...string) int {
		hc := proc.StartWith(t, proc.Options{Env: []string{"FORMICA_HTTP=" + httpAddr}}, "worker healthcheck", bin.worker, append([]string{"healthcheck"}, args...)...)
		return hc.Wait(t, 30*time.Second)
	}
	if code := check(); code != 0 {
		t.Fatalf("worker healthcheck while waiting for NATS: exit %d, want 0 (the process is up)", code)
	}
	if code := check("--ready"); code != 1 {
		t.Fatalf("worker healthcheck --ready while waiting for NATS: exit %d, want 1", code)
	}

	// The coordinator, with its embedded NATS server, comes up later.
	c := proc.StartWith(t, proc.Options{}, "coordinator", bin.coordinator,
		"--data-dir", dataDir, "--nats-listen", fmt.Sprintf("127.0.0.1:%d", ports[0]),
		"--http", fmt.Sprintf("127.0.0.1:%d", ports[2]), "--heartbeat", "250ms")
	c.WaitLog(t, "coordinator ready", startTimeout)
	w.WaitLog(t, "worker ready", startTimeout)
	if !strings.Contains(w.Stderr.String(), "nats connected") {
		t.Errorf("the worker did not log its late connection")
	}
	proc.WaitUntil(t, startTimeout, "the worker is ready", func() bool { return check("--ready") == 0 })
	api := fmt.Sprintf("http://127.0.0.1:%d", ports[2])
	proc.WaitUntil(t, startTimeout, "the coordinator lists the worker", func() bool {
		var ws []struct{ ID string }
		getJSON(api+"/v1/workers", &ws)
		return len(ws) == 1 && ws[0].ID == "early"
	})
}

// A worker given a --connect-timeout gives up with a clear error.
func TestWorkerConnectTimeout(t *testing.T) {
	w := workerOn(t, "patient", proc.NATSURL(proc.FreePorts(t, 1)[0]), "FORMICA_CONNECT_TIMEOUT=1s")
	if code := w.Wait(t, startTimeout); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(w.Stderr.String(), "no connection within --connect-timeout 1s") {
		t.Fatalf("stderr does not explain the timeout:\n%s", w.Stderr.String())
	}
}

// A second coordinator on a data directory in use refuses to start, exits
// 1 and names the holder; the first goes on.
func TestSecondCoordinatorOnLockedDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	ports := proc.FreePorts(t, 4)
	first := proc.StartWith(t, proc.Options{}, "first coordinator", bin.coordinator, "--data-dir", dir,
		"--nats-listen", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--http", fmt.Sprintf("127.0.0.1:%d", ports[1]))
	first.WaitLog(t, "coordinator ready", startTimeout)

	second := proc.StartWith(t, proc.Options{Env: []string{"FORMICA_DATA_DIR=" + dir}}, "second coordinator", bin.coordinator,
		"--nats-listen", fmt.Sprintf("127.0.0.1:%d", ports[2]), "--http", fmt.Sprintf("127.0.0.1:%d", ports[3]))
	if code := second.Wait(t, startTimeout); code != 1 {
		t.Fatalf("second coordinator: exit %d, want 1", code)
	}
	host, _ := os.Hostname()
	holder := fmt.Sprintf("pid %d on host %s", first.Cmd.Process.Pid, host)
	if msg := second.Stderr.String(); !strings.Contains(msg, "data directory in use") || !strings.Contains(msg, holder) {
		t.Fatalf("second coordinator's error does not name the holder %q:\n%s", holder, msg)
	}
	// The first goes on: up, its NATS and store fine (not ready only for
	// want of a worker, the first-hour rule).
	api := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	var ready struct{ Error struct{ Message string } }
	if first.Exited() || getJSON(api+"/healthz", nil) != 200 || getJSON(api+"/readyz", &ready) != 503 ||
		!strings.Contains(ready.Error.Message, "no live worker") {
		t.Fatalf("the first coordinator suffered: %s, /readyz: %+v", first.Status(), ready)
	}
}

// SIGTERM on a coordinator whose run finishes within the grace: the run
// finishes there, once, and the process exits 0.
func TestDrainFinishesRunWithinGrace(t *testing.T) {
	n := startNATS(t)
	workerOn(t, "w1", n.url).WaitLog(t, "worker ready", startTimeout)
	c, api := coordinatorOn(t, "c1", n.url, "FORMICA_DRAIN_GRACE=2m")
	id := submit(t, api, map[string]any{"id": "drain-finish", "task": "Slowly:\n- one\n- two", "agent": slowAgent(time.Second)})
	proc.WaitUntil(t, runTimeout, "the run is running on c1", func() bool {
		r, ok := n.record(t, id)
		return ok && r.Status == event.Running && r.Coordinator == "c1"
	})
	if err := c.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := c.Wait(t, runTimeout); code != 0 {
		t.Fatalf("coordinator exit %d after SIGTERM, want 0", code)
	}
	r, _ := n.record(t, id)
	if r.Status != event.Succeeded || r.Attempts != 1 || r.Coordinator != "c1" {
		t.Fatalf("run %s: status %s, attempts %d, coordinator %q; want succeeded once on c1", id, r.Status, r.Attempts, r.Coordinator)
	}
	if !strings.Contains(c.Stderr.String(), "drained: every run finished") {
		t.Errorf("the coordinator did not log its drain")
	}
}

// SIGTERM on a coordinator whose run outlasts the grace: the run goes back
// to the queue, the other coordinator takes it and finishes it, and the
// first exits 0. Nothing is lost.
func TestDrainHandsRunToOtherCoordinator(t *testing.T) {
	n := startNATS(t)
	workerOn(t, "w1", n.url).WaitLog(t, "worker ready", startTimeout)
	c1, api := coordinatorOn(t, "c1", n.url, "FORMICA_DRAIN_GRACE=300ms")
	id := submit(t, api, map[string]any{"id": "drain-handback", "task": "Slowly:\n- one\n- two", "agent": slowAgent(3 * time.Second)})
	proc.WaitUntil(t, runTimeout, "the run is running on c1", func() bool {
		r, ok := n.record(t, id)
		return ok && r.Status == event.Running && r.Coordinator == "c1"
	})
	coordinatorOn(t, "c2", n.url)
	if err := c1.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := c1.Wait(t, runTimeout); code != 0 {
		t.Fatalf("c1 exit %d after SIGTERM, want 0", code)
	}
	if !strings.Contains(c1.Stderr.String(), "handing the remaining runs back to the queue") {
		t.Errorf("c1 did not log the hand-back")
	}
	proc.WaitUntil(t, 2*runTimeout, "the run finishes on c2", func() bool {
		r, _ := n.record(t, id)
		return r.Status.Final()
	})
	r, _ := n.record(t, id)
	if r.Status != event.Succeeded || r.Coordinator != "c2" || r.Attempts != 2 {
		t.Fatalf("run %s: status %s on %q after %d attempts (%s); want succeeded on c2 at attempt 2", id, r.Status, r.Coordinator, r.Attempts, r.Error)
	}
}

// --version on all three binaries, and `formica version`.
func TestVersion(t *testing.T) {
	for _, c := range []struct {
		name, bin string
		args      []string
	}{
		{"coordinator", bin.coordinator, []string{"--version"}},
		{"worker", bin.worker, []string{"--version"}},
		{"formica", bin.formica, []string{"--version"}},
		{"formica", bin.formica, []string{"version"}},
	} {
		// FORMICA_VERSION (an image tag, say) must not trigger --version.
		p := proc.StartWith(t, proc.Options{Env: []string{"FORMICA_VERSION=v9"}}, c.name, c.bin, c.args...)
		if code := p.Wait(t, 30*time.Second); code != 0 {
			t.Fatalf("%s %v: exit %d", c.name, c.args, code)
		}
		if out := p.Stdout.String(); !strings.HasPrefix(out, c.name+" ") || !strings.Contains(out, "go1.") {
			t.Errorf("%s %v printed %q", c.name, c.args, out)
		}
	}
}

// Workers on one credentials pool each take a file no other holds: with
// the pool's only file held, the next worker exits 1 saying so; once its
// holder dies, the next worker takes it.
// (No NATS server: the holders wait for it, holding their credentials.)
func TestWorkerCredentialsPool(t *testing.T) {
	dataDir, pool := t.TempDir(), t.TempDir()
	issue := proc.Start(t, "coordinator creds", bin.coordinator, "creds", "--data-dir", dataDir, "--role", "worker", "--id", "pooled-1",
		"--out", filepath.Join(pool, "pooled-1.creds"))
	if code := issue.Wait(t, startTimeout); code != 0 {
		t.Fatalf("coordinator creds: exit %d", code)
	}
	natsURL := proc.NATSURL(proc.FreePorts(t, 1)[0])
	start := func(name string) *proc.Proc {
		return proc.StartWith(t, proc.Options{Env: []string{"FORMICA_NATS=" + natsURL, "FORMICA_NATS_CREDS_POOL=" + pool}}, name, bin.worker)
	}
	holder := start("holder")
	holder.WaitLog(t, "credentials taken from the pool", startTimeout)
	holder.WaitLog(t, "nats not reachable yet, retrying", startTimeout)

	second := start("second")
	if code := second.Wait(t, startTimeout); code != 1 {
		t.Fatalf("second worker on a pool of one: exit %d, want 1", code)
	}
	if !strings.Contains(second.Stderr.String(), "every file of the pool is in use") {
		t.Fatalf("second worker's error does not say the pool is used up:\n%s", second.Stderr.String())
	}

	holder.Kill(t)
	third := start("third")
	third.WaitLog(t, "credentials taken from the pool", startTimeout)
	if !strings.Contains(third.Stderr.String(), "pooled-1.creds") {
		t.Fatalf("third worker did not take the freed credentials:\n%s", third.Stderr.String())
	}
}
