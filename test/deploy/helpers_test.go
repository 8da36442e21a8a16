package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/broker/brokertest"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/test/proc"
)

const (
	startTimeout = 60 * time.Second
	runTimeout   = 90 * time.Second
)

// natsServer is a JetStream NATS server in the test process, listening on
// loopback: the external cluster coordinators and workers connect to.
type natsServer struct {
	url string
	st  *store.Store
}

func startNATS(t *testing.T) *natsServer {
	t.Helper()
	s := brokertest.Start(t)
	nc, err := s.Connect("deploy-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	st, err := store.Open(ctx, nc, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &natsServer{url: s.ClientURL(), st: st}
}

// record reads a run's record from the store.
func (n *natsServer) record(t *testing.T, id string) (record.Run, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, _, err := n.st.GetRecord(ctx, id)
	return r, err == nil
}

// coordinatorOn starts a coordinator on an external NATS, configured from
// the environment only, and waits until it is ready. It returns the process
// and its API base URL.
func coordinatorOn(t *testing.T, name, natsURL string, env ...string) (*proc.Proc, string) {
	t.Helper()
	port := proc.FreePorts(t, 1)[0]
	env = append([]string{
		"NATS_URL=" + natsURL,
		fmt.Sprintf("FORMICA_HTTP=127.0.0.1:%d", port),
		"FORMICA_ID=" + name,
		"FORMICA_HEARTBEAT=250ms",
	}, env...)
	p := proc.StartWith(t, proc.Options{Env: env}, name, bin.coordinator)
	p.WaitLog(t, "coordinator ready", startTimeout)
	return p, fmt.Sprintf("http://127.0.0.1:%d", port)
}

// workerOn starts a worker on natsURL, configured from the environment.
func workerOn(t *testing.T, name, natsURL string, env ...string) *proc.Proc {
	t.Helper()
	env = append([]string{"FORMICA_NATS=" + natsURL, "FORMICA_ID=" + name, "FORMICA_HEARTBEAT=250ms"}, env...)
	return proc.StartWith(t, proc.Options{Env: env}, name, bin.worker)
}

// slowAgent is an agent whose every model call takes latency.
func slowAgent(latency time.Duration) map[string]any {
	return map[string]any{"name": "slow", "model": "sim", "model_args": map[string]any{"latency_ms": latency.Milliseconds()}, "tools": []string{"agent"}}
}

// submit posts a run to an API and returns its id.
func submit(t *testing.T, api string, body map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(api+"/v1/runs", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/runs: %s %s", resp.Status, out)
	}
	var r struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	return r.RunID
}

// getJSON GETs url into v and returns the status code (0 when unreachable).
func getJSON(url string, v any) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if v != nil {
		json.NewDecoder(resp.Body).Decode(v)
	}
	return resp.StatusCode
}
