package browser_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/test/proc"
)

// Bounds of the waits.
const (
	readyTimeout = 30 * time.Second // a process logs that it is ready
	runTimeout   = 90 * time.Second // a run ends
	pageTimeout  = 30 * time.Second // the page shows what it should
)

const heartbeat = "200ms"

// coord is a coordinator process with its embedded NATS server and the
// HTTP API that serves the dashboard, both on free loopback ports.
type coord struct {
	t     *testing.T
	url   string // NATS client URL
	api   string // HTTP base URL
	token string
	env   []string // of the workers (model endpoints)
	beat  string   // --heartbeat of coordinator and workers
	p     *proc.Proc
	data  string // --data-dir, whose authority issues the workers' credentials
}

type coordOpts struct {
	token string   // FORMICA_HTTP_TOKEN
	model string   // --model
	extra []string // more flags
	// heartbeat is the --heartbeat of the coordinator and its workers;
	// default the short one of the fault tests.
	heartbeat string
}

func startCoord(t *testing.T, o coordOpts) *coord {
	t.Helper()
	c := &coord{t: t, token: o.token, beat: o.heartbeat}
	if c.beat == "" {
		c.beat = heartbeat
	}
	dataDir, cwd := t.TempDir(), t.TempDir()
	c.data = dataDir
	for attempt := 1; ; attempt++ {
		ports := proc.FreePorts(t, 2)
		c.url = proc.NATSURL(ports[0])
		c.api = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		args := []string{"--id", "coord", "--data-dir", dataDir, "--cwd", cwd,
			"--nats-listen", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--http", fmt.Sprintf("127.0.0.1:%d", ports[1]),
			"--heartbeat", c.beat}
		if o.model != "" {
			args = append(args, "--model", o.model)
		}
		args = append(args, o.extra...)
		var env []string
		if o.token != "" {
			env = []string{"FORMICA_HTTP_TOKEN=" + o.token}
		}
		c.p = proc.StartWith(t, proc.Options{Env: env}, "coordinator", bin.coordinator, args...)
		if c.p.AwaitLog(t, "coordinator ready", readyTimeout) {
			return c
		}
		if attempt == 3 || !strings.Contains(c.p.Stderr.String(), "address already in use") {
			t.Fatalf("coordinator did not start (%s)", c.p.Status())
		}
	}
}

// startWorker starts a worker process and waits until the coordinator lists it.
func (c *coord) startWorker(id string, slots int, extra ...string) *proc.Proc {
	c.t.Helper()
	p := proc.StartWith(c.t, proc.Options{Env: c.env}, "worker "+id, bin.worker, append([]string{"--nats", c.url,
		"--nats-creds", proc.Creds(c.t, bin.coordinator, c.data, "worker", id),
		"--slots", strconv.Itoa(slots), "--heartbeat", c.beat}, extra...)...)
	p.WaitLog(c.t, "worker ready", readyTimeout)
	proc.WaitUntil(c.t, readyTimeout, "the coordinator lists worker "+id, func() bool { return c.hasWorker(id) })
	return p
}

func (c *coord) hasWorker(id string) bool {
	var ws []struct{ ID string }
	c.getJSON("/v1/workers", &ws)
	for _, w := range ws {
		if w.ID == id {
			return true
		}
	}
	return false
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

// do sends an API request with the bearer token and returns status and body.
func (c *coord) do(method, path string, body any) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, c.api+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := httpClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, data
}

func (c *coord) getJSON(path string, v any) {
	c.t.Helper()
	status, data := c.do("GET", path, nil)
	if status != 200 {
		c.t.Fatalf("GET %s: %d %s", path, status, data)
	}
	if err := json.Unmarshal(data, v); err != nil {
		c.t.Fatalf("GET %s: %v", path, err)
	}
}

// submit queues a run through the API and returns its id.
func (c *coord) submit(body map[string]any) string {
	c.t.Helper()
	status, data := c.do("POST", "/v1/runs", body)
	if status != http.StatusAccepted {
		c.t.Fatalf("submit: %d %s", status, data)
	}
	var r struct {
		RunID string `json:"run_id"`
	}
	json.Unmarshal(data, &r)
	return r.RunID
}

func (c *coord) record(id string) record.Run {
	c.t.Helper()
	var r record.Run
	c.getJSON("/v1/runs/"+id, &r)
	return r
}

// waitFinal waits until run id's record is final and returns it.
func (c *coord) waitFinal(id string) record.Run {
	c.t.Helper()
	var r record.Run
	proc.WaitUntil(c.t, runTimeout, "run "+id+" finishes", func() bool {
		r = c.record(id)
		return r.Status.Final()
	})
	return r
}

// slowAgent is the sim model taking ms per call, as a spec file's text.
func slowAgent(ms int) string {
	return fmt.Sprintf("name: slow\nmodel: sim\nmodel_args: {latency_ms: %d}\ntools: [agent]\n", ms)
}
