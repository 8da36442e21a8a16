package scale_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/test/proc"
)

var httpClient = &http.Client{Timeout: 30 * time.Second}

// metrics scrapes a process's /metrics and returns each unlabelled sample
// (and each labelled one under its full name with labels).
func metrics(base string) (map[string]float64, error) {
	resp, err := httpClient.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("GET %s/metrics: %s %s", base, resp.Status, b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// post sends body as JSON and decodes the reply into v, failing the test
// unless the status is want.
func post(t *testing.T, url string, body, v any, want int) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpClient.Post(url, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %s %s", url, resp.Status, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("POST %s: %v", url, err)
		}
	}
}

// getJSON GETs url into v and returns the status (0 when unreachable).
func getJSON(url string, v any) int {
	resp, err := httpClient.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			return 0
		}
	}
	return resp.StatusCode
}

// process is a started process and the base URL of its HTTP listener.
type process struct {
	p   *proc.Proc
	api string
}

// startNATS starts a NATS server process with JetStream on a free loopback
// port and returns its client URL.
func startNATS(t *testing.T) string {
	t.Helper()
	for attempt := 1; ; attempt++ {
		port := proc.FreePorts(t, 1)[0]
		p := proc.Start(t, "nats-server", bin.nats, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", t.TempDir())
		if p.AwaitLog(t, "Server is ready", 30*time.Second) {
			return proc.NATSURL(port)
		}
		if attempt == 3 || !strings.Contains(p.Stderr.String(), "address already in use") {
			t.Fatalf("nats-server did not start (%s)", p.Status())
		}
	}
}

// start starts bin with args and an HTTP listener on a free loopback port
// (flag --http), and waits until it logs ready.
func start(t *testing.T, name, bin, ready string, env []string, args ...string) process {
	t.Helper()
	for attempt := 1; ; attempt++ {
		api := fmt.Sprintf("127.0.0.1:%d", proc.FreePorts(t, 1)[0])
		p := proc.StartWith(t, proc.Options{Env: env}, name, bin, append(args, "--http", api)...)
		if p.AwaitLog(t, ready, 60*time.Second) {
			return process{p: p, api: "http://" + api}
		}
		if attempt == 3 || !strings.Contains(p.Stderr.String(), "address already in use") {
			t.Fatalf("%s did not start (%s)", name, p.Status())
		}
	}
}

// listTask is a task the sim model splits into n parallel helpers.
func listTask(n int) string {
	var b strings.Builder
	b.WriteString("Do each of these:\n")
	for i := range n {
		fmt.Fprintf(&b, "- item %d\n", i)
	}
	return b.String()
}

const kib = 1024.0

// pollEvery is how often the test asks the processes: a scrape of /metrics
// stops the world of a process for its memory statistics, so asking every
// few milliseconds, as proc.WaitUntil does, would load what it measures.
const pollEvery = 250 * time.Millisecond

// every polls cond every pollEvery until it holds, failing with what after
// timeout.
func every(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(pollEvery)
	}
}
