package durable_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/test/proc"
)

// Bounds of the waits.
const (
	readyTimeout = 30 * time.Second // a process logs that it is ready
	cliTimeout   = 60 * time.Second // a formica command ends
	runTimeout   = 60 * time.Second // a submitted run ends
)

// Timings of the processes under test.
const (
	heartbeat = "200ms"
	ackWait   = "2s"
)

// coord is a coordinator process: its embedded NATS server (JetStream under
// dataDir) and its HTTP API, both on loopback ports that survive restarts.
type coord struct {
	t        *testing.T
	name     string
	args     []string
	env      []string
	url      string // NATS client URL
	api      string // HTTP API base URL
	token    string // bearer token of the API ("" without)
	dataDir  string
	cwd      string // --cwd: where submitted runs' tools act
	p        *proc.Proc
	restarts int
	cliCreds string   // the CLI's client credentials, issued on first use
	cliEnv   []string // more environment for the CLI's processes
}

// coordOpts are a test's coordinator flags beyond the common ones.
type coordOpts struct {
	maxRuns         int
	approvalTimeout string
	// token is the API's bearer token, given in FORMICA_HTTP_TOKEN, or with
	// tokenFlag in --http-token.
	token     string
	tokenFlag bool
	// httpHost is the host the API listens on; default 127.0.0.1. The
	// tests reach it on 127.0.0.1 either way.
	httpHost string
	extra    []string
	// env is added to the coordinator's environment.
	env []string
	// defaults leaves --id, --heartbeat and --queue-ack-wait at their
	// defaults.
	defaults bool
}

// startCoord starts a coordinator on free loopback ports and waits until it
// is ready; a start that lost a port to another process is tried again.
func startCoord(t *testing.T, o coordOpts) *coord {
	t.Helper()
	c := &coord{t: t, name: "coordinator", dataDir: t.TempDir(), cwd: t.TempDir(), token: o.token}
	for attempt := 1; ; attempt++ {
		ports := proc.FreePorts(t, 2)
		c.url = proc.NATSURL(ports[0])
		c.api = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		host := o.httpHost
		if host == "" {
			host = "127.0.0.1"
		}
		c.args = []string{"--data-dir", c.dataDir, "--cwd", c.cwd,
			"--nats-listen", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--http", fmt.Sprintf("%s:%d", host, ports[1]), "--allow-scripted"}
		if !o.defaults {
			c.args = append(c.args, "--id", "coord", "--heartbeat", heartbeat, "--queue-ack-wait", ackWait)
		}
		if o.maxRuns > 0 {
			c.args = append(c.args, "--max-runs", strconv.Itoa(o.maxRuns))
		}
		if o.approvalTimeout != "" {
			c.args = append(c.args, "--approval-timeout", o.approvalTimeout)
		}
		switch {
		case o.token != "" && o.tokenFlag:
			c.args = append(c.args, "--http-token", o.token)
		case o.token != "":
			c.env = []string{"FORMICA_HTTP_TOKEN=" + o.token}
		}
		c.args = append(c.args, o.extra...)
		c.env = append(c.env, o.env...)
		if c.start() {
			return c
		}
		if attempt == 3 || !strings.Contains(c.p.Stderr.String(), "address already in use") {
			t.Fatalf("coordinator did not start (%s)", c.p.Status())
		}
		t.Logf("coordinator: a port was taken, trying others")
	}
}

// start starts the process with c.args; false if it exited before it was ready.
func (c *coord) start() bool {
	c.t.Helper()
	name := c.name
	if c.restarts > 0 {
		name = fmt.Sprintf("%s (start %d)", c.name, c.restarts+1)
	}
	c.p = proc.StartWith(c.t, proc.Options{Env: c.env}, name, bin.coordinator, c.args...)
	return c.p.AwaitLog(c.t, "coordinator ready", readyTimeout)
}

// kill9 kills the coordinator with SIGKILL, its NATS server with it.
func (c *coord) kill9() { c.p.Kill(c.t) }

// restart starts the coordinator again with the same flags: the same data
// directory and ports, so JetStream's state and the clients' URLs survive.
func (c *coord) restart() {
	c.t.Helper()
	c.restarts++
	if !c.start() {
		c.t.Fatalf("coordinator did not start again (%s)", c.p.Status())
	}
}

// creds issues credentials of role under id from the coordinator's data dir.
func (c *coord) creds(role, id string) string {
	c.t.Helper()
	return proc.Creds(c.t, bin.coordinator, c.dataDir, role, id)
}

// clientCreds are the CLI's credentials.
func (c *coord) clientCreds() string {
	if c.cliCreds == "" {
		c.cliCreds = c.creds("client", "cli")
	}
	return c.cliCreds
}

// connect opens the test's own NATS connection, as a coordinator would.
func (c *coord) connect() *nats.Conn {
	c.t.Helper()
	nc, err := nats.Connect(c.url, nats.Name("durable-test"), nats.UserCredentials(c.creds("coordinator", "test")))
	if err != nil {
		c.t.Fatalf("connect to %s: %v", c.url, err)
	}
	return nc
}

// startWorker starts a worker process and waits until the coordinator lists it.
func (c *coord) startWorker(id string, slots int, extra ...string) *proc.Proc {
	c.t.Helper()
	return c.startWorkerWith(id, slots, nil, extra...)
}

// startWorkerWith is startWorker with environment variables.
func (c *coord) startWorkerWith(id string, slots int, env []string, extra ...string) *proc.Proc {
	c.t.Helper()
	args := append([]string{"--nats", c.url, "--nats-creds", c.creds("worker", id),
		"--slots", strconv.Itoa(slots), "--heartbeat", heartbeat, "--allow-scripted"}, extra...)
	p := proc.StartWith(c.t, proc.Options{Env: env}, "worker "+id, bin.worker, args...)
	p.WaitLog(c.t, "worker ready", readyTimeout)
	proc.WaitUntil(c.t, readyTimeout, "the coordinator lists worker "+id, func() bool {
		var ws []struct{ ID string }
		c.getJSON("/v1/workers", &ws)
		for _, w := range ws {
			if w.ID == id {
				return true
			}
		}
		return false
	})
	return p
}

// cliResult is how a formica command ended.
type cliResult struct {
	stdout, stderr string
	code           int
}

// cli runs formica with args against this cluster (FORMICA_NATS) and waits
// for it to end.
func (c *coord) cli(args ...string) cliResult {
	c.t.Helper()
	p := c.startCLI(args...)
	code := p.Wait(c.t, cliTimeout)
	return cliResult{p.Stdout.String(), p.Stderr.String(), code}
}

// startCLI starts formica with args against this cluster.
func (c *coord) startCLI(args ...string) *proc.Proc {
	c.t.Helper()
	return c.startCLIEnv(nil, args...)
}

// startCLIEnv is startCLI with environment variables.
func (c *coord) startCLIEnv(env []string, args ...string) *proc.Proc {
	c.t.Helper()
	env = append(append([]string{"FORMICA_NATS=" + c.url, "FORMICA_NATS_CREDS=" + c.clientCreds()}, c.cliEnv...), env...)
	return proc.StartWith(c.t, proc.Options{Env: env},
		"formica "+strings.Join(args[:min(len(args), 2)], " "), bin.formica, args...)
}

// cliJSON runs formica with args, expects exit 0 and decodes its stdout.
func (c *coord) cliJSON(v any, args ...string) {
	c.t.Helper()
	r := c.cli(args...)
	if r.code != 0 {
		c.t.Fatalf("formica %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		c.t.Fatalf("formica %s: stdout is not JSON: %v\n%s", strings.Join(args, " "), err, proc.Tail(r.stdout, 4096))
	}
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

// do sends an API request (body: nil, []byte or a value sent as JSON) with
// the cluster's token, and returns the status and the body.
func (c *coord) do(method, path string, body any, header ...string) (int, []byte, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, c.api+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// call is do that fails the test unless the status is want, and decodes the
// body into v (when not nil).
func (c *coord) call(want int, method, path string, body, v any) {
	c.t.Helper()
	code, data, err := c.do(method, path, body)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	if code != want {
		c.t.Fatalf("%s %s: %d %s, want %d", method, path, code, data, want)
	}
	if v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			c.t.Fatalf("%s %s: %v\n%s", method, path, err, data)
		}
	}
}

// getJSON is a GET that returns its status, decoding a 200's body into v
// (connection errors count as status 0).
func (c *coord) getJSON(path string, v any) int {
	code, data, err := c.do(http.MethodGet, path, nil)
	if err != nil {
		return 0
	}
	if code == http.StatusOK && v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			c.t.Errorf("GET %s: %v", path, err)
		}
	}
	return code
}

// submit posts a run and returns its id.
func (c *coord) submit(body map[string]any) string {
	c.t.Helper()
	var resp struct {
		RunID string `json:"run_id"`
	}
	c.call(http.StatusAccepted, http.MethodPost, "/v1/runs", body, &resp)
	return resp.RunID
}

// record returns a run's record through the API.
func (c *coord) record(id string) record.Run {
	c.t.Helper()
	var r record.Run
	c.call(http.StatusOK, http.MethodGet, "/v1/runs/"+id, nil, &r)
	return r
}

// waitFinal waits until the run's record is final and returns it.
func (c *coord) waitFinal(id string) record.Run {
	c.t.Helper()
	return c.waitFinalWithin(id, runTimeout)
}

// waitFinalWithin is waitFinal with a bound of its own.
func (c *coord) waitFinalWithin(id string, timeout time.Duration) record.Run {
	c.t.Helper()
	var r record.Run
	proc.WaitUntil(c.t, timeout, "run "+id+" has ended", func() bool {
		r = record.Run{}
		return c.getJSON("/v1/runs/"+id, &r) == http.StatusOK && r.Status.Final()
	})
	return r
}

// waitStatus waits until the run's record has status s.
func (c *coord) waitStatus(id string, s event.Status) record.Run {
	c.t.Helper()
	var r record.Run
	proc.WaitUntil(c.t, runTimeout, fmt.Sprintf("run %s is %s", id, s), func() bool {
		r = record.Run{}
		return c.getJSON("/v1/runs/"+id, &r) == http.StatusOK && r.Status == s
	})
	return r
}

// simAgent is an agent spec, as the API takes it, on the sim model with
// latencyMS per model call; helpers inherit both.
func simAgent(latencyMS int) map[string]any {
	return map[string]any{"name": "formica", "model": "sim", "model_args": map[string]any{"latency_ms": latencyMS}, "tools": []string{"agent"}}
}

// simAgentFile writes simAgent as a spec file for the CLI's --agent.
func simAgentFile(t *testing.T, latencyMS int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.yaml")
	spec := fmt.Sprintf("name: formica\nmodel: sim\nmodel_args: {latency_ms: %d}\ntools: [agent]\n", latencyMS)
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeFile writes a file in a fresh directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
