package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/coordinator"
	"github.com/formica-run/formica/internal/embedded"
	"github.com/formica-run/formica/internal/limits"
	"github.com/formica-run/formica/internal/model/providers"
	"github.com/formica-run/formica/internal/runner"
)

// Roles of the memory scenario's child processes.
const (
	RoleCoordinator = "coordinator"
	RoleWorkers     = "workers"
)

// RoleFlag is the first argument of a role process ("--role NAME ...").
const RoleFlag = "--role"

// readyLine is what a role process prints once it serves.
const readyLine = "ready"

// memReport is one process's memory after a collection, and what it hosts.
type memReport struct {
	Heap       uint64 `json:"heap"`
	Stack      uint64 `json:"stack"`
	Goroutines int    `json:"goroutines"`
	// Workers is how many workers a coordinator sees; Hosted the threads
	// the workers host.
	Workers int `json:"workers"`
	Hosted  int `json:"hosted"`
}

func (m memReport) bytes() uint64 { return m.Heap + m.Stack }

// readMem collects twice (the second frees what finalizers released) and
// reads the live heap and the goroutine stacks.
func readMem() memReport {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memReport{Heap: ms.HeapAlloc, Stack: ms.StackInuse, Goroutines: runtime.NumGoroutine()}
}

func controlSubject(id, role string) string { return "formica.bench." + id + "." + role }

// RoleMain runs one side of the memory scenario: a coordinator, or workers,
// connected to the NATS at --nats. It prints "ready" once started, answers
// memory reports on its control subject, and stops when stdin closes. It
// returns the process exit code.
func RoleMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("formica bench --role", flag.ContinueOnError)
	fs.SetOutput(stderr)
	role := fs.String("role", "", "coordinator or workers")
	url := fs.String("nats", "", "NATS URL")
	id := fs.String("id", "", "control subject token")
	name := fs.String("name", "", "worker id prefix (role workers); the control subject's last token")
	workers := fs.Int("workers", 1, "workers to start (role workers)")
	slots := fs.Int("slots", 64, "slots per worker")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := serveRole(*role, *url, *id, *name, *workers, *slots, stdin, stdout); err != nil {
		fmt.Fprintln(stderr, "formica bench role:", err)
		return 1
	}
	return 0
}

// benchCeilings are raised far past the sizes the scenarios ask for: the
// benchmarks measure the spawn path, not the coordinator's ceilings.
var benchCeilings = limits.Ceilings{MaxThreads: 1 << 20, MaxDepth: 64, MaxSpawns: 1 << 24, MaxTaskBytes: 64 << 20}

// benchCoordinator is the coordinator the scenarios run: ceilings raised,
// and workers' slots not capped (the default cap of 256 per worker held the
// memory scenario's 10,000 helpers to 4 × 256 placed, so it never got
// them all live and timed out).
// Its runs act in directories made under the temporary directory.
var benchCoordinator = coordinator.Config{Ceilings: benchCeilings, MaxWorkerSlots: 1 << 20, Cwd: os.TempDir()}

// benchMaxToolCalls is the workers' cap on a turn's tool calls, raised past
// the scenarios' fan-outs (10,000 helpers from one response) as the
// ceilings are.
const benchMaxToolCalls = 1 << 20

func serveRole(role, url, id, name string, workers, slots int, stdin io.Reader, stdout io.Writer) error {
	if url == "" || id == "" || (role != RoleCoordinator && role != RoleWorkers) || (role == RoleWorkers && name == "") {
		return fmt.Errorf("%w: need --role coordinator|workers, --nats, --id, and --name for workers", ErrBadConfig)
	}
	connect := func(n string) (*nats.Conn, error) { return nats.Connect(url, nats.Name(n)) }
	cfg := embedded.Config{Connect: connect, Coordinator: benchCoordinator}
	if role == RoleWorkers {
		// The workers' ids, and with them placement's tie-break, are known:
		// "<name>-<n>".
		cfg.NoCoordinator, cfg.Workers, cfg.Slots, cfg.MaxToolCalls = true, workers, slots, benchMaxToolCalls
		cfg.Models = runner.ModelOpenerFunc(providers.Open)
		for i := range workers {
			cfg.WorkerIDs = append(cfg.WorkerIDs, fmt.Sprintf("%s-%d", name, i+1))
		}
	}
	stack, err := embedded.Start(context.Background(), cfg)
	if err != nil {
		return err
	}
	defer stack.Stop()
	ws := stack.Workers
	nc, err := stack.Connect("bench-control")
	if err != nil {
		return err
	}
	if role == RoleWorkers {
		role = name
	}
	sub, err := nc.Subscribe(controlSubject(id, role), func(m *nats.Msg) {
		r := readMem()
		if stack.Coordinator != nil {
			r.Workers = len(stack.Coordinator.Workers())
		}
		for _, w := range ws {
			r.Hosted += w.Hosted()
		}
		b, _ := json.Marshal(r)
		m.Respond(b)
	})
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, readyLine)
	io.Copy(io.Discard, stdin) // the parent closes stdin to stop us
	return nil
}

// child is a running role process.
type child struct {
	role  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	errs  *tailBuffer
	done  chan error
}

// startChild starts a role process and waits for it to say it is ready.
// name names a workers process (its workers are "<name>-1", ...).
func (b *suite) startChild(ctx context.Context, role, name, url, id string, workers, slots int) (*child, error) {
	args := []string{RoleFlag, role, "--nats", url, "--id", id, "--name", name,
		"--workers", strconv.Itoa(workers), "--slots", strconv.Itoa(slots)}
	var cmd *exec.Cmd
	if b.cfg.Child != nil {
		cmd = b.cfg.Child(args)
	} else {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cmd = exec.Command(exe, append([]string{"bench"}, args...)...)
	}
	ch := &child{role: role, cmd: cmd, errs: &tailBuffer{max: 8 << 10}, done: make(chan error, 1)}
	cmd.Stderr = ch.errs
	var err error
	if ch.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s process: %w", role, err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := false
		for sc.Scan() {
			if !ok && strings.TrimSpace(sc.Text()) == readyLine {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
	}()
	go func() { ch.done <- cmd.Wait() }()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case ok := <-ready:
		if ok {
			return ch, nil
		}
		ch.stop()
		return nil, fmt.Errorf("%s process ended before it was ready: %s", role, ch.errs)
	case <-timer.C:
	case <-ctx.Done():
	}
	ch.stop()
	return nil, fmt.Errorf("%s process not ready: %s", role, ch.errs)
}

// stop closes the child's stdin and waits for it, killing it if it lingers.
func (c *child) stop() {
	c.stdin.Close()
	select {
	case <-c.done:
		return
	case <-time.After(20 * time.Second):
	}
	c.cmd.Process.Kill()
	<-c.done
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.b))
	if s == "" {
		return "(no output)"
	}
	return s
}
