package cluster_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/wire"
	tproc "github.com/formica-run/formica/test/proc"
)

// threadMessage is the exact tool result of a spawn past the thread limit.
const threadMessage = "Agent thread limit reached. Solve the task yourself."

// eventTimeout bounds waits for something a run is about to do.
const eventTimeout = 30 * time.Second

func started(depth func(int) bool) func(event.Event) bool {
	return func(e event.Event) bool { return e.Type == event.ThreadStarted && depth(e.Depth) }
}

func isRoot(d int) bool { return d == 0 }
func helper(d int) bool { return d > 0 }

// falselyLost lists the workers presumed lost that then heartbeat again.
func falselyLost(events []event.Event) []string {
	lost := map[string]bool{}
	var back []string
	for _, e := range events {
		switch {
		case e.Type == event.WorkerLost:
			lost[e.Worker] = true
		case e.Type == event.WorkerJoined && lost[e.Worker]:
			back = append(back, e.Worker)
			delete(lost, e.Worker)
		}
	}
	return back
}

// maxLive is the most helpers alive at once in run's events, counting
// from..to: +1 on from, -1 on to (both only for helpers).
func maxLive(events []event.Event, run string, from, to event.Type) (peak, end int) {
	live := 0
	for _, e := range events {
		if e.RunID != run || e.Depth == 0 {
			continue
		}
		switch e.Type {
		case from:
			live++
			peak = max(peak, live)
		case to:
			live--
		}
	}
	return peak, live
}

// endsOnce checks that every thread of run seen in events ended exactly once:
// consumers count live helpers from these events.
func endsOnce(t *testing.T, l *eventLog, rec record.Run) {
	t.Helper()
	l.wait(t, eventTimeout, "run.finished is seen", func(e event.Event) bool {
		return e.Type == event.RunFinished && e.RunID == rec.RunID
	})
	if ws := falselyLost(l.all()); len(ws) > 0 {
		// The earlier placement on a worker presumed lost but alive runs on
		// and reports its own end (see the package doc): nothing to check.
		t.Logf("workers %v were presumed lost but came back; not checking thread ends", ws)
		return
	}
	ends := map[string]int{}
	names := map[string]string{}
	for _, e := range l.all() {
		if e.RunID != rec.RunID || e.ThreadID == "" {
			continue
		}
		switch e.Type {
		case event.ThreadSpawned, event.ThreadStarted:
			names[e.ThreadID] = e.Name
			if _, ok := ends[e.ThreadID]; !ok {
				ends[e.ThreadID] = 0
			}
		case event.ThreadFinished:
			ends[e.ThreadID]++
		}
	}
	for id, n := range ends {
		if n != 1 {
			t.Errorf("thread %s (%s): %d thread.finished events, want 1", names[id], id, n)
		}
	}
}

// TestThreeLevelTreeSpreadsOverWorkers: a coordinator and three worker
// processes run a root with three helpers of two helpers each; the helpers
// overlap and land on all three workers.
func TestThreeLevelTreeSpreadsOverWorkers(t *testing.T) {
	s := startStack(t, "coord")
	for i := 1; i <= 3; i++ {
		s.startWorker(fmt.Sprintf("w%d", i), 4)
	}
	task := "Plan:\n- a\n  - a1\n  - a2\n- b\n  - b1\n  - b2\n- c\n  - c1\n  - c2"
	rec := succeeded(t, s.run("--agent", simAgent(t, 300), task))

	want := "a: a1: done: a1\n  a2: done: a2\nb: b1: done: b1\n  b2: done: b2\nc: c1: done: c1\n  c2: done: c2"
	if rec.Output != want {
		t.Errorf("output:\n%s\nwant:\n%s", rec.Output, want)
	}
	depths := map[int]int{}
	workers := map[string]int{}
	for _, th := range rec.Threads {
		depths[th.Depth]++
		workers[th.Worker]++
		if th.Status != event.Succeeded || th.Worker == "" {
			t.Errorf("thread %s (depth %d): status %q on worker %q", th.Name, th.Depth, th.Status, th.Worker)
		}
		if th.StartedAt.IsZero() || th.FinishedAt.Before(th.StartedAt) {
			t.Errorf("thread %s: started %v, finished %v", th.Name, th.StartedAt, th.FinishedAt)
		}
	}
	if depths[0] != 1 || depths[1] != 3 || depths[2] != 6 || len(rec.Threads) != 10 {
		t.Errorf("threads by depth %v, want 1 root, 3 at depth 1, 6 at depth 2", depths)
	}
	for _, w := range []string{"w1", "w2", "w3"} {
		if workers[w] == 0 {
			t.Errorf("no thread ran on %s; threads per worker: %v", w, workers)
		}
	}
	endsOnce(t, s.events, rec)
	if peak, _ := maxLive(s.events.all(), rec.RunID, event.ThreadStarted, event.ThreadFinished); peak < 3 {
		t.Errorf("at most %d helpers ran at once; the fan-out should overlap", peak)
	}
}

// TestWorkerKilledMidHelper: SIGKILL of a worker while it runs a helper; the
// coordinator notices the silence, runs the helper elsewhere, the run
// succeeds, and the surviving workers end with nothing running or parked.
func TestWorkerKilledMidHelper(t *testing.T) {
	s := startStack(t, "coord")
	workers := map[string]*proc{}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("w%d", i)
		workers[id] = s.startWorker(id, 4, "--heartbeat", fastHeartbeat)
	}
	run := s.run("--agent", simAgent(t, 2500), "Split:\n- x\n- y\n- z")

	root := s.events.wait(t, eventTimeout, "the root thread started", started(isRoot))
	waitUntil(t, eventTimeout, "three helpers started", func() bool {
		n := 0
		for _, e := range s.events.all() {
			if started(helper)(e) {
				n++
			}
		}
		return n >= 3
	})
	// Prefer a worker that hosts a helper but not the (parked) root, so the
	// loss hits exactly one helper.
	var victim, victimThread string
	for _, e := range s.events.all() {
		if started(helper)(e) && (victim == "" || victim == root.Worker) {
			victim, victimThread = e.Worker, e.ThreadID
		}
	}
	time.Sleep(500 * time.Millisecond) // well inside the helper's 2.5 s model call
	t.Logf("killing %s (hosts helper %s; the root is on %s)", victim, victimThread, root.Worker)
	workers[victim].kill(t)

	rec := succeeded(t, run)
	s.events.wait(t, eventTimeout, "worker.lost for "+victim, func(e event.Event) bool {
		return e.Type == event.WorkerLost && e.Worker == victim
	})
	s.events.wait(t, eventTimeout, "worker.lost for "+victim+" in the run's stream", func(e event.Event) bool {
		return e.Type == event.WorkerLost && e.Worker == victim && e.RunID == rec.RunID
	})
	if victim != root.Worker {
		s.events.wait(t, eventTimeout, "thread.replaced for "+victimThread, func(e event.Event) bool {
			return e.Type == event.ThreadReplaced && e.ThreadID == victimThread && e.RunID == rec.RunID &&
				e.Worker == victim && strings.Contains(e.Reason, "lost")
		})
		for _, th := range rec.Threads {
			if th.Status != event.Succeeded {
				t.Errorf("thread %s: status %q (%s)", th.Name, th.Status, th.Error)
			}
			if th.ID == victimThread && (th.Worker == victim || th.Worker == "") {
				t.Errorf("helper %s still recorded on %q after %s died", th.Name, th.Worker, victim)
			}
		}
		if len(rec.Threads) != 4 {
			t.Errorf("%d threads in the record, want the root and 3 helpers", len(rec.Threads))
		}
	}
	endsOnce(t, s.events, rec)
	var survivors []string
	for id := range workers {
		if id != victim {
			survivors = append(survivors, id)
		}
	}
	s.hb.waitIdle(t, 10*time.Second, survivors...)
}

// TestInterruptCancelsTreeAndBash: Ctrl-C on `formica run` while a helper's
// bash command waits on a background sleep cancels the whole tree: the run
// ends cancelled with exit status 1 and the sleep is killed with its call.
func TestInterruptCancelsTreeAndBash(t *testing.T) {
	s := startStack(t, "coord")
	s.startWorker("w1", 4)
	dir := t.TempDir()
	marker := tproc.Marker() // the sleep's argument: found among the host's processes
	command := fmt.Sprintf("sleep %s & wait", marker)
	scriptPath := writeScript(t, dir, "sleeper-task", command)
	run := s.run("--model", "scripted:"+scriptPath, "--approve", "allow", "root-task")

	if !tproc.WaitArg(eventTimeout, marker, func(m map[int]byte) bool { return len(m) > 0 }) {
		t.Fatalf("the helper's bash never started sleep %s", marker)
	}
	if err := run.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	code, rec := result(t, run)
	if code != 1 || rec.Status != event.Cancelled {
		t.Errorf("exit %d, status %q (%s); want 1 and cancelled", code, rec.Status, rec.Error)
	}
	for _, th := range rec.Threads {
		if th.Status != event.Cancelled {
			t.Errorf("thread %s: status %q, want cancelled", th.Name, th.Status)
		}
	}
	endsOnce(t, s.events, rec)
	tproc.WaitNoArg(t, marker, 10*time.Second)
	s.hb.waitIdle(t, 10*time.Second, "w1")
}

// writeScript writes a scripted model file in dir: the root spawns one
// helper with task, which runs command in bash and then answers.
func writeScript(t *testing.T, dir, task, command string) string {
	t.Helper()
	script := fmt.Sprintf(`responses:
  - when: %[1]s
    tool_calls:
      - name: bash
        arguments: {command: %[2]s}
  - when: %[1]s
    text: slept
  - when: root-task
    tool_calls:
      - name: agent
        arguments: {name: sleeper, task: %[1]s}
  - when: root-task
    text: root done
`, task, strconv.Quote(command))
	path := filepath.Join(dir, "script.yaml")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestWorkerKilledDuringBashLeavesOneSideEffect: kill -9 of the worker whose
// helper runs `sleep 2; echo x >> f`. The sandbox kills the call with its
// worker, so the orphan never writes; the helper placed again runs the
// command once more, and f ends with exactly one line.
func TestWorkerKilledDuringBashLeavesOneSideEffect(t *testing.T) {
	s := startStack(t, "coord")
	workers := map[int]*proc{}
	for i := 1; i <= 2; i++ {
		w := s.startWorker(fmt.Sprintf("w%d", i), 4, "--heartbeat", fastHeartbeat)
		workers[w.cmd.Process.Pid] = w
	}
	cwd, dir := t.TempDir(), t.TempDir()
	marker := fmt.Sprintf("2.%06d", rand.IntN(1000000)) // sleep 2 s, findable on the host
	scriptPath := writeScript(t, dir, "writer-task", fmt.Sprintf("sleep %s; echo x >> f", marker))
	run := s.run("--model", "scripted:"+scriptPath, "--approve", "allow", "--cwd", cwd, "root-task")

	var sleeps map[int]byte
	if !tproc.WaitArg(eventTimeout, marker, func(m map[int]byte) bool { sleeps = m; return len(m) > 0 }) {
		t.Fatalf("the helper's bash never started sleep %s", marker)
	}
	var victim *proc
	for pid := range sleeps {
		for p := pid; p > 1 && victim == nil; p = parentOf(p) {
			victim = workers[p]
		}
	}
	if victim == nil {
		t.Fatalf("no worker is an ancestor of sleep %v", sleeps)
	}
	t.Logf("killing %s during the helper's bash call", victim.name)
	victim.kill(t)
	tproc.WaitNoArg(t, marker, 5*time.Second)

	rec := succeeded(t, run)
	if b, err := os.ReadFile(filepath.Join(cwd, "f")); err != nil || string(b) != "x\n" {
		t.Errorf("f holds %q (%v); want exactly one line", b, err)
	}
	endsOnce(t, s.events, rec)
}

// parentOf is pid's parent on the host, or 0.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if err != nil || i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// TestWorkerJoiningMidRunGetsWork: one worker with two slots is too small
// for eight helpers; a worker started after the run has begun takes some.
func TestWorkerJoiningMidRunGetsWork(t *testing.T) {
	s := startStack(t, "coord")
	s.startWorker("w1", 2)
	var task strings.Builder
	task.WriteString("Eight jobs:")
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&task, "\n- job %d", i)
	}
	run := s.run("--agent", simAgent(t, 1500), task.String())
	s.events.wait(t, eventTimeout, "a helper started", started(helper))
	s.startWorker("w2", 4)

	rec := succeeded(t, run)
	on := map[string]int{}
	for _, th := range rec.Threads {
		on[th.Worker]++
		if th.Status != event.Succeeded {
			t.Errorf("thread %s: status %q", th.Name, th.Status)
		}
	}
	if on["w2"] == 0 || len(rec.Threads) != 9 {
		t.Errorf("threads per worker %v (of %d); want some on w2, 9 in all", on, len(rec.Threads))
	}
	// The run's own stream says a worker joined while it ran.
	s.events.wait(t, eventTimeout, "worker.joined for w2 in the run's stream", func(e event.Event) bool {
		return e.Type == event.WorkerJoined && e.Worker == "w2" && e.RunID == rec.RunID
	})
}

// TestSpawnStormRespectsThreadLimit: a root spawns 200 helpers in one
// response. Never more than the limit (16) are alive, and each refused
// spawn comes back with the exact refusal text.
func TestSpawnStormRespectsThreadLimit(t *testing.T) {
	const width, limit = 200, 16
	s := startStack(t, "coord")
	// The storm keeps every process busy, -race makes it slower still:
	// default heartbeats, so no worker is presumed lost for being slow.
	s.startWorker("w1", 12, "--heartbeat", "1s")
	s.startWorker("w2", 12, "--heartbeat", "1s")
	var task strings.Builder
	task.WriteString("Storm:")
	for i := 1; i <= width; i++ {
		fmt.Fprintf(&task, "\n- job %d", i)
	}
	rec := succeeded(t, s.run("--agent", simAgent(t, 300), "--agent-max-threads", strconv.Itoa(limit), task.String()))

	lines := strings.Split(rec.Output, "\n")
	done, refused := 0, 0
	for i, line := range lines {
		name, res, _ := strings.Cut(line, ": ")
		switch {
		case name != fmt.Sprintf("job-%d", i+1):
			t.Errorf("line %d is for %q: %q", i+1, name, line)
		case res == threadMessage:
			refused++
		case res == fmt.Sprintf("done: job %d", i+1):
			done++
		default:
			t.Errorf("line %d: %q", i+1, line)
		}
	}
	if len(lines) != width || done+refused != width || refused == 0 {
		t.Errorf("%d lines: %d done, %d refused; want %d lines, some refused", len(lines), done, refused, width)
	}

	endsOnce(t, s.events, rec)
	events := s.events.all()
	peak, end := maxLive(events, rec.RunID, event.ThreadSpawned, event.ThreadFinished)
	if peak > limit {
		t.Errorf("live helpers peaked at %d, limit %d", peak, limit)
	}
	t.Logf("%d helpers ran, %d refused, at most %d alive at once", done, refused, peak)
	if ws := falselyLost(events); len(ws) > 0 {
		// A root placed again spawns its helpers again: the record and the
		// events then hold both attempts. The output is still the last one's.
		t.Logf("workers %v were presumed lost but came back; not counting the record", ws)
		return
	}
	if rec.Refusals.Threads != refused || rec.Refusals.Depth != 0 {
		t.Errorf("record refusals %+v, output has %d thread refusals", rec.Refusals, refused)
	}
	if len(rec.Threads) != done+1 {
		t.Errorf("%d threads in the record, want the root and %d helpers", len(rec.Threads), done)
	}
	n := 0
	for _, e := range events {
		if e.RunID == rec.RunID && e.Type == event.ThreadRefused {
			n++
		}
	}
	if n != refused || end != 0 {
		t.Errorf("%d thread.refused events, %d refusals in the output; %d helpers alive at the end", n, refused, end)
	}
}

// TestBadMessagesGetErrorReplies: garbage, an empty message and a message of
// an unknown protocol version sent to a worker's exec subject and the
// coordinator's spawn subject each get an error reply, and both processes
// keep working.
func TestBadMessagesGetErrorReplies(t *testing.T) {
	s := startStack(t, "coord-probe")
	w := s.startWorker("w-probe", 4)
	future := func(typ wire.Type, body any) []byte {
		b, err := msgpack.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		data, err := msgpack.Marshal(&wire.Envelope{Type: typ, Version: 99, Body: b})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	for _, target := range []struct {
		subject string
		v99     []byte
	}{
		{wire.SubjectExec("w-probe"), future(wire.TypeExecRequest, wire.ExecRequest{Coordinator: "coord-probe"})},
		{wire.SubjectSpawn("coord-probe", "w-probe"), future(wire.TypeSpawnRequest, wire.SpawnRequest{RunID: "r", ParentID: "p", Name: "n", Task: "t"})},
	} {
		for _, c := range []struct {
			name, code string
			data       []byte
		}{
			{"garbage", string(wire.CodeBadMessage), []byte("\xc1\x00 not msgpack \xff")},
			{"empty", string(wire.CodeBadMessage), nil},
			{"version 99", string(wire.CodeUnsupportedVersion), target.v99},
		} {
			reply, err := s.nc.Request(target.subject, c.data, 5*time.Second)
			if err != nil {
				t.Errorf("%s to %s: %v", c.name, target.subject, err)
				continue
			}
			if typ, code := reply.Header.Get("Formica-Type"), reply.Header.Get("Formica-Error"); typ != "error" || code != c.code {
				t.Errorf("%s to %s: reply type %q code %q (%q), want error %s", c.name, target.subject, typ, code, reply.Data, c.code)
			}
		}
	}
	if s.coord.exited() || w.exited() {
		t.Fatalf("coordinator %s, worker %s", s.coord.status(), w.status())
	}
	rec := succeeded(t, s.run("--agent", simAgent(t, 0), "Check:\n- one\n- two"))
	if len(rec.Threads) != 3 {
		t.Errorf("%d threads, want 3", len(rec.Threads))
	}
}
