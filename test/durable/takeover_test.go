package durable_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/test/proc"
)

// takeoverAckWait is the queue's AckWait in the takeover tests: far longer
// than the tests wait, so only a run's lease can bring a dead
// coordinator's run back.
const takeoverAckWait = "10m"

// twoHelperRun is a run of two helpers on the sim model with 2 s model
// calls: about 6 s undisturbed (the root's call, the helpers' in parallel,
// the root's answer).
func twoHelperRun(id string) map[string]any {
	return map[string]any{"id": id, "task": "Ship it:\n- build\n- test", "agent": simAgent(2000)}
}

// killedAt3s submits a two-helper run on c, kills c's process 3 s after
// the run started, and returns the run's id and when it started.
func killedAt3s(t *testing.T, c *coord, id string) time.Time {
	t.Helper()
	c.submit(twoHelperRun(id))
	started := c.waitStatus(id, event.Running)
	time.Sleep(time.Until(started.StartedAt.Add(3 * time.Second)))
	c.kill9()
	return started.StartedAt
}

// ran is how long run r took from its first start to its end.
func ran(r record.Run, started time.Time) time.Duration { return r.FinishedAt.Sub(started) }

// TestTakeoverAfterRestart: a two-helper run with 2 s model calls, its
// coordinator (default flags but the queue's AckWait, 10 min) killed with
// SIGKILL 3 s into the run and restarted at once. The restarted
// coordinator has the same id (kept in its data dir) and takes the runs its
// predecessor's leases name over at once: the run succeeds in a second
// attempt, long before the AckWait. The test logs how much later than the
// same run undisturbed it finished.
func TestTakeoverAfterRestart(t *testing.T) {
	t.Parallel()
	c := startCoord(t, coordOpts{defaults: true, extra: []string{"--queue-ack-wait", takeoverAckWait}})
	c.startWorker("w1", 4, "--heartbeat", "1s")

	calm := c.submit(twoHelperRun("calm"))
	base := c.waitFinal(calm)
	if base.Status != event.Succeeded {
		t.Fatalf("undisturbed run: %s (%s)", base.Status, base.Error)
	}
	startedAt := killedAt3s(t, c, "killed")
	c.restart()
	r := c.waitFinal("killed")
	if r.Status != event.Succeeded || r.Attempts != 2 {
		t.Fatalf("killed run: %s (%s) in %d attempts; want succeeded in 2", r.Status, r.Error, r.Attempts)
	}
	if !c.p.AwaitLog(t, "run taken over", readyTimeout) {
		t.Errorf("the restarted coordinator logged no takeover:\n%s", proc.Tail(c.p.Stderr.String(), 20))
	}
	t.Logf("undisturbed %v; killed at 3s and restarted: %v (%v later)", ran(base, base.StartedAt).Round(time.Millisecond),
		ran(r, startedAt).Round(time.Millisecond), (ran(r, startedAt) - ran(base, base.StartedAt)).Round(time.Millisecond))
}

// TestTakeoverBySecondCoordinator: the same run on an external nats-server,
// its coordinator killed 3 s into it while a second coordinator (default
// flags but the AckWait) runs on the same NATS: the second one sees the
// run's lease go unrenewed, takes the run over and finishes it.
func TestTakeoverBySecondCoordinator(t *testing.T) {
	t.Parallel()
	url, trust := startNATSServer(t)
	cwd := t.TempDir() // where both coordinators' runs act
	first := startNATSCoord(t, "first", url, trust, cwd)
	first.startWorker("w1", 4, "--heartbeat", "1s")

	base := first.waitFinal(first.submit(twoHelperRun("calm")))
	if base.Status != event.Succeeded {
		t.Fatalf("undisturbed run: %s (%s)", base.Status, base.Error)
	}
	first.submit(twoHelperRun("killed"))
	running := first.waitStatus("killed", event.Running)
	second := startNATSCoord(t, "second", url, trust, cwd)
	time.Sleep(time.Until(running.StartedAt.Add(3 * time.Second)))
	first.kill9()
	r := second.waitFinal("killed")
	if r.Status != event.Succeeded || r.Attempts != 2 || r.Coordinator == running.Coordinator {
		t.Fatalf("killed run: %s (%s) in %d attempts by %s; want succeeded in 2 by another than %s",
			r.Status, r.Error, r.Attempts, r.Coordinator, running.Coordinator)
	}
	t.Logf("undisturbed %v; killed at 3s, taken over: %v (%v later)", ran(base, base.StartedAt).Round(time.Millisecond),
		ran(r, running.StartedAt).Round(time.Millisecond), (ran(r, running.StartedAt) - ran(base, base.StartedAt)).Round(time.Millisecond))
}

// startNATSServer starts a nats-server on a loopback port that trusts
// the credentials issued from the returned data dir.
func startNATSServer(t *testing.T) (url, trust string) {
	t.Helper()
	trust = t.TempDir()
	conf := filepath.Join(trust, "trust.conf")
	if code := proc.Start(t, "creds", bin.coordinator, "creds", "--data-dir", trust, "--nats-server-conf", "--out", conf).Wait(t, cliTimeout); code != 0 {
		t.Fatalf("coordinator creds --nats-server-conf exited %d", code)
	}
	port := proc.FreePorts(t, 1)[0]
	server := filepath.Join(trust, "nats.conf")
	cfg := fmt.Sprintf("listen: 127.0.0.1:%d\njetstream: {store_dir: %q}\ninclude trust.conf\n", port, filepath.Join(trust, "js"))
	if err := os.WriteFile(server, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	proc.Start(t, "nats-server", bin.natsServer, "-c", server).WaitLog(t, "Server is ready", readyTimeout)
	return proc.NATSURL(port), trust
}

// startNATSCoord starts a coordinator on the nats-server at url, with its
// own HTTP API and the queue's AckWait of the takeover tests, its runs'
// tools acting in cwd.
func startNATSCoord(t *testing.T, name, url, trust, cwd string) *coord {
	t.Helper()
	c := &coord{t: t, name: name, url: url, dataDir: trust, cwd: cwd,
		api: fmt.Sprintf("http://127.0.0.1:%d", proc.FreePorts(t, 1)[0])}
	c.args = []string{"--nats", url, "--nats-creds", c.creds("coordinator", name), "--cwd", c.cwd,
		"--http", c.api[len("http://"):], "--queue-ack-wait", takeoverAckWait, "--allow-scripted"}
	if !c.start() {
		t.Fatalf("coordinator %s did not start (%s)", name, c.p.Status())
	}
	return c
}

// TestFrozenCoordinatorFenced: the run's coordinator is frozen (SIGSTOP)
// 3 s into the run; a second coordinator on the same NATS takes the run
// over and finishes it. Continued (SIGCONT), the first one finds its lease
// taken and stops the run without touching it: the record the second
// stored stays as it is, and the run's events tell of one end.
func TestFrozenCoordinatorFenced(t *testing.T) {
	t.Parallel()
	url, trust := startNATSServer(t)
	cwd := t.TempDir()
	first := startNATSCoord(t, "first", url, trust, cwd)
	first.startWorker("w1", 4, "--heartbeat", "1s")
	first.submit(twoHelperRun("frozen"))
	running := first.waitStatus("frozen", event.Running)
	second := startNATSCoord(t, "second", url, trust, cwd)
	time.Sleep(time.Until(running.StartedAt.Add(3 * time.Second)))
	pid := first.p.Cmd.Process.Pid
	if err := first.p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	proc.WaitUntil(t, readyTimeout, "the first coordinator is stopped", func() bool { return stopped(t, pid) })
	r := second.waitFinal("frozen")
	if r.Status != event.Succeeded || r.Attempts != 2 || r.Coordinator == running.Coordinator {
		t.Fatalf("frozen run: %s (%s) in %d attempts by %s; want succeeded in 2 by another than %s",
			r.Status, r.Error, r.Attempts, r.Coordinator, running.Coordinator)
	}
	if err := first.p.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	first.p.WaitLog(t, "run left to the coordinator that took it over", readyTimeout)
	after := second.record("frozen")
	if after.Status != r.Status || after.Attempts != r.Attempts || after.Coordinator != r.Coordinator || !after.FinishedAt.Equal(r.FinishedAt) {
		t.Errorf("the record changed after the frozen coordinator was continued: %+v, was %+v", after, r)
	}
	events, _, _ := second.sse("frozen", 0, 0)
	finished := 0
	for _, e := range events {
		if e.e.Type == event.RunFinished {
			finished++
		}
	}
	if finished != 1 {
		t.Errorf("%d run.finished events; want the second coordinator's alone", finished)
	}
	if strings.Contains(first.p.Stderr.String(), "run finished") {
		t.Errorf("the frozen coordinator finished the run it no longer held:\n%s", proc.Tail(first.p.Stderr.String(), 20))
	}
}
