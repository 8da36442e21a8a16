package durable_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/formica-run/formica/test/proc"
)

// promtoolPath returns promtool (Debian's prometheus package, which
// .ci/run installs), skipping the test without it outside CI.
func promtoolPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found in CI: .ci/run installs Debian's prometheus package")
		}
		t.Skip("promtool not found (apt-get install prometheus)")
	}
	return p
}

// rawMetrics fetches a /metrics page in the Prometheus text format.
func rawMetrics(t *testing.T, url, token string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(body)
}

// bothRoles are the metrics a coordinator and a worker each export about
// themselves: the build and the journal writes they make.
var bothRoles = []string{"formica_build_info", "formica_journal_write_errors_total"}

// TestPromtoolChecksMetrics: after a run, `promtool check metrics` finds
// no problem in a coordinator's or a worker's /metrics, and neither
// exports the other role's metrics.
func TestPromtoolChecksMetrics(t *testing.T) {
	t.Parallel()
	promtool := promtoolPath(t)
	c := startCoord(t, coordOpts{token: "metrics-token"})
	port := proc.FreePorts(t, 1)[0]
	c.startWorker("w1", 4, "--http", fmt.Sprintf("127.0.0.1:%d", port))
	id := c.submit(map[string]any{"task": "Plan:\n- a\n- b", "agent": simAgent(20)})
	if rec := c.waitFinal(id); rec.Status != "succeeded" {
		t.Fatalf("run %s: %s (%s)", id, rec.Status, rec.Error)
	}

	names := map[string]map[string]bool{}
	for role, url := range map[string]string{"coordinator": c.api + "/metrics", "worker": fmt.Sprintf("http://127.0.0.1:%d/metrics", port)} {
		token := ""
		if role == "coordinator" {
			token = c.token
		}
		page := rawMetrics(t, url, token)
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(page)
		if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("promtool check metrics on the %s's /metrics: %v\n%s", role, err, out)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(page))
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		names[role] = map[string]bool{}
		for name := range fams {
			if strings.HasPrefix(name, "formica_") {
				names[role][name] = true
			}
		}
	}
	for _, want := range []struct{ role, has string }{
		{"coordinator", "formica_runs_finished_total"}, {"coordinator", "formica_http_requests_total"},
		{"worker", "formica_model_requests_total"}, {"worker", "formica_tool_calls_total"},
	} {
		if !names[want.role][want.has] {
			t.Errorf("the %s exports no %s", want.role, want.has)
		}
	}
	for name := range names["worker"] {
		if names["coordinator"][name] && !slices.Contains(bothRoles, name) {
			t.Errorf("%s is exported by both the coordinator and the worker", name)
		}
	}
}

// TestPromtoolChecksDeploy: the recording rules and alerts and the
// Prometheus config of deploy/ pass promtool. The config is checked beside
// a token file, as the compose file mounts one.
func TestPromtoolChecksDeploy(t *testing.T) {
	t.Parallel()
	promtool := promtoolPath(t)
	deploy := filepath.Join("..", "..", "deploy")
	if out, err := exec.Command(promtool, "check", "rules", filepath.Join(deploy, "prometheus-rules.yml")).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
	dir := t.TempDir()
	for _, f := range []string{"prometheus.yml", "prometheus-rules.yml"} {
		data, err := os.ReadFile(filepath.Join(deploy, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "http-token"), []byte("token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "config", filepath.Join(dir, "prometheus.yml")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1 rule files found") {
		t.Errorf("promtool check config: %v\n%s", err, out)
	}
}
