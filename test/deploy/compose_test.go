package deploy_test

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/formica-run/formica/test/proc"
)

// composeTimeout bounds the whole compose test, builds included.
const composeTimeout = 12 * time.Minute

// composeServices are the services the test brings up: all but the cli and
// observability profiles (podman-compose 1.0 ignores profiles, so they are
// left out by name; their images are not available without a registry).
var composeServices = []string{"nats-1", "nats-2", "nats-3", "coordinator-1", "coordinator-2", "worker"}

// stack is a compose project brought up by the test.
type stack struct {
	t       *testing.T
	ctx     context.Context
	dir     string // the compose file and its config, copied, with fresh secrets
	project string
	env     []string
	api     string
	token   string
}

// TestComposeStack brings deploy/compose.yml up, as written, with
// podman-compose, with images built FROM scratch from the release binary
// (deploy/build.sh) and a nats-server built from its Go module, passed in
// through the image variables: every container turns healthy by the
// compose file's own healthchecks, a run succeeds on the workers, survives
// losing a NATS node and a worker mid-run, workers scale to 3, and
// `down -v` leaves nothing.
func TestComposeStack(t *testing.T) {
	for _, tool := range []string{"podman", "podman-compose"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping the compose stack test: %s is not installed (.ci/run installs podman, podman-compose and runc)", tool)
		}
	}
	busybox := staticBusybox()
	if busybox == "" {
		t.Skip("skipping the compose stack test: no static busybox for the NATS image's sh and wget (apt-get install busybox-static)")
	}
	if testing.Short() {
		t.Skip("skipping the compose stack test in -short mode")
	}
	if err := podmanRuns(busybox); err != nil {
		t.Skipf("skipping the compose stack test: podman is installed but cannot run a container here: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), composeTimeout)
	defer cancel()
	s := &stack{t: t, ctx: ctx, dir: t.TempDir(), project: "formica-test-" + uuid.NewString()[:8]}
	tag := s.project
	formicaImage, natsImage := "localhost/formica:"+tag, "localhost/formica-nats:"+tag
	s.buildImages(formicaImage, natsImage, busybox)

	for _, f := range []string{"nats.conf", "prometheus.yml", "prometheus-rules.yml", "init-env.sh"} {
		copyFile(t, filepath.Join(root, "deploy", f), filepath.Join(s.dir, f))
	}
	// The compose file as operators get it: test settings go in through
	// the environment only.
	copyFile(t, filepath.Join(root, "deploy", "compose.yml"), filepath.Join(s.dir, "compose.yml"))
	// The credentials come from the release binary's `coordinator creds`.
	s.runEnv([]string{"COORDINATOR=" + filepath.Join(s.dir, "images", "bin", "coordinator"), "FORMICA_MAX_WORKERS=3"},
		"sh", filepath.Join(s.dir, "init-env.sh"), s.dir)
	token, err := os.ReadFile(filepath.Join(s.dir, "secrets", "http-token"))
	if err != nil {
		t.Fatal(err)
	}
	s.token = strings.TrimSpace(string(token))
	ports := proc.FreePorts(t, 2)
	s.api = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	s.env = []string{
		"FORMICA_IMAGE=" + formicaImage, "FORMICA_WORKER_IMAGE=" + formicaImage, "NATS_IMAGE=" + natsImage,
		fmt.Sprintf("FORMICA_HTTP_PORT=%d", ports[0]), fmt.Sprintf("FORMICA_HTTP_PORT_2=%d", ports[1]),
		"FORMICA_DRAIN_GRACE=5s",
	}

	t.Cleanup(s.down)
	// podman-compose 1.0 ignores --scale; it honours deploy.replicas,
	// which compose.yml takes from FORMICA_WORKERS.
	s.env = append(s.env, "FORMICA_WORKERS=2")
	s.compose(append([]string{"up", "-d"}, composeServices...)...)
	s.waitHealthy(3+2+2, "")
	s.waitWorkers(2)
	s.checkTrust()

	// A run succeeds on the workers.
	id := s.submit(map[string]any{"task": "Plan:\n- research\n- write"})
	if r := s.waitRun(id); r.Status != "succeeded" {
		t.Fatalf("run %s: %s (%s)", id, r.Status, r.Error)
	}

	// One NATS node and one worker die mid-run; the run still succeeds.
	slow := map[string]any{"name": "slow", "model": "sim", "model_args": map[string]any{"latency_ms": 2000}, "tools": []string{"agent"}}
	id = s.submit(map[string]any{"task": "Slowly:\n- one\n- two\n- three\n- four", "agent": slow})
	s.waitUntil("the slow run is running", func() bool { return s.record(id).Status == "running" })
	s.run("podman", "kill", s.container("nats-2", 1))
	s.run("podman", "kill", s.container("worker", 1))
	if r := s.waitRun(id); r.Status != "succeeded" {
		t.Fatalf("run %s after losing nats-2 and a worker: %s (%s)", id, r.Status, r.Error)
	}

	// Scale the workers to 3 and see them listed, each under the id of the
	// credentials it took from the pool (the killed one, restarted, takes
	// free ones again).
	s.env = append(s.env, "FORMICA_WORKERS=3")
	s.compose("up", "-d", "worker")
	s.waitHealthy(3, "worker")
	ids := s.waitWorkers(3)
	for _, id := range ids {
		if !regexp.MustCompile(`^worker-[1-3]$`).MatchString(id) {
			t.Errorf("worker ids %v: want worker-1..3, from the credentials pool", ids)
		}
	}
}

// checkTrust shows the NATS cluster in operator mode: the CLI with the
// client's credentials (the compose file's cli service) lists the runs, and
// the same command without credentials is refused.
func (s *stack) checkTrust() {
	t := s.t
	cmd := exec.CommandContext(s.ctx, "podman-compose", "-p", s.project, "-f", filepath.Join(s.dir, "compose.yml"), "run", "--rm", "cli", "runs")
	cmd.Env = append(os.Environ(), s.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compose run cli runs (client credentials): %v\n%s", err, proc.Tail(string(out), 4<<10))
	}
	out, err := exec.CommandContext(s.ctx, "podman", "exec", "-e", "FORMICA_NATS_CREDS=", "-e", "FORMICA_CONNECT_TIMEOUT=30s", // a refusal ends it at once; the bound is for a loaded machine
		s.container("coordinator-1", 1), "formica", "runs").CombinedOutput()
	if err == nil || !strings.Contains(strings.ToLower(string(out)), "authorization violation") {
		t.Fatalf("formica runs without credentials: %v, want an authorization violation\n%s", err, proc.Tail(string(out), 4<<10))
	}
}

func (s *stack) buildImages(formicaImage, natsImage, busybox string) {
	t := s.t
	ctxDir := filepath.Join(s.dir, "images")
	bin, nats := filepath.Join(ctxDir, "bin"), filepath.Join(ctxDir, "nats")
	// The release recipe, as deploy/Dockerfile runs it.
	s.runIn(root, "sh", "deploy/build.sh", bin, "ci-test")
	s.runIn(root, "env", "CGO_ENABLED=0", "go", "build", "-trimpath", "-o", filepath.Join(nats, "nats-server"), "github.com/nats-io/nats-server/v2")
	// The nats alpine image's busybox: sh (compose runs healthchecks
	// through it) and wget (the healthcheck).
	copyFile(t, busybox, filepath.Join(nats, "bin", "busybox"))
	for _, l := range []string{"sh", "wget"} {
		if err := os.Symlink("busybox", filepath.Join(nats, "bin", l)); err != nil {
			t.Fatal(err)
		}
	}
	// The release image's /bin/sh: the formica binary, which runs one
	// program (deploy/Dockerfile).
	if err := os.MkdirAll(filepath.Join(ctxDir, "rootbin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/local/bin/formica", filepath.Join(ctxDir, "rootbin", "sh")); err != nil {
		t.Fatal(err)
	}
	certs := "/etc/ssl/certs/ca-certificates.crt"
	if _, err := os.Stat(certs); err == nil {
		copyFile(t, certs, filepath.Join(ctxDir, "ca-certificates.crt"))
	} else {
		os.WriteFile(filepath.Join(ctxDir, "ca-certificates.crt"), nil, 0o644)
	}
	// The release image's layout and user, on scratch instead of distroless.
	writeFile(t, filepath.Join(ctxDir, "Containerfile.formica"), `FROM scratch
COPY bin/ /usr/local/bin/
COPY rootbin/ /bin/
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV PATH=/usr/local/bin FORMICA_DATA_DIR=/tmp
USER 65532:65532
CMD ["formica", "--help"]
`)
	writeFile(t, filepath.Join(ctxDir, "Containerfile.nats"), `FROM scratch
COPY nats/nats-server /nats-server
COPY nats/bin/ /bin/
ENV PATH=/bin
ENTRYPOINT ["/nats-server"]
`)
	s.run("podman", "build", "-q", "-f", filepath.Join(ctxDir, "Containerfile.formica"), "-t", formicaImage, ctxDir)
	s.run("podman", "build", "-q", "-f", filepath.Join(ctxDir, "Containerfile.nats"), "-t", natsImage, ctxDir)
	t.Cleanup(func() { exec.Command("podman", "rmi", "-f", formicaImage, natsImage).Run() })
}

// down takes the stack down with its volumes and checks nothing is left.
func (s *stack) down() {
	t := s.t
	if t.Failed() {
		for _, svc := range []string{"coordinator-1", "coordinator-2", "worker", "nats-1"} {
			out, _ := exec.Command("podman", "logs", "--tail", "60", s.container(svc, 1)).CombinedOutput()
			t.Logf("---- %s ----\n%s", svc, proc.Tail(string(out), 8<<10))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman-compose", "-p", s.project, "-f", filepath.Join(s.dir, "compose.yml"), "down", "-v", "-t", "10")
	cmd.Env = append(os.Environ(), s.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("compose down -v: %v\n%s", err, proc.Tail(string(out), 4<<10))
	}
	label := "label=io.podman.compose.project=" + s.project
	for _, what := range [][]string{
		{"ps", "-a", "--filter", label, "--format", "{{.Names}}"},
		{"volume", "ls", "--filter", label, "--format", "{{.Name}}"},
		{"pod", "ls", "--filter", "name=" + s.project, "--format", "{{.Name}}"},
	} {
		out, err := exec.Command("podman", what...).CombinedOutput()
		if left := strings.TrimSpace(string(out)); err != nil || left != "" {
			t.Errorf("after down -v, podman %s: %v %s", what[0], err, left)
		}
	}
	// podman-compose 1.0 leaves the project's network behind; docker
	// compose removes it. Check it holds no container, then remove it.
	out, _ := exec.Command("podman", "network", "ls", "--filter", "name="+s.project, "--format", "{{.Name}}").Output()
	for _, n := range strings.Fields(string(out)) {
		if err := exec.Command("podman", "network", "rm", n).Run(); err != nil {
			t.Errorf("network %s still in use after down -v: %v", n, err)
		}
	}
}

func (s *stack) container(service string, n int) string {
	return fmt.Sprintf("%s_%s_%d", s.project, service, n)
}

func (s *stack) compose(args ...string) {
	s.t.Helper()
	cmd := exec.CommandContext(s.ctx, "podman-compose", append([]string{"-p", s.project, "-f", filepath.Join(s.dir, "compose.yml")}, args...)...)
	cmd.Env = append(os.Environ(), s.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("podman-compose %v: %v\n%s", args, err, proc.Tail(string(out), 8<<10))
	}
}

func (s *stack) run(name string, args ...string) { s.t.Helper(); s.runIn("", name, args...) }

func (s *stack) runIn(dir, name string, args ...string) {
	s.t.Helper()
	cmd := exec.CommandContext(s.ctx, name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("%s %v: %v\n%s", name, args, err, proc.Tail(string(out), 8<<10))
	}
}

func (s *stack) runEnv(env []string, name string, args ...string) {
	s.t.Helper()
	cmd := exec.CommandContext(s.ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("%s %v: %v\n%s", name, args, err, proc.Tail(string(out), 8<<10))
	}
}

// waitUntil polls cond every 250ms within the test's bound.
func (s *stack) waitUntil(what string, cond func() bool) {
	s.t.Helper()
	for !cond() {
		select {
		case <-s.ctx.Done():
			s.t.Fatalf("timed out waiting until %s", what)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// request calls the API with the stack's token; status 0: unreachable.
func (s *stack) request(method, path string, body, out any) int {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, s.api+path, rd)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// waitWorkers waits until GET /v1/workers lists n workers and returns
// their ids.
func (s *stack) waitWorkers(n int) []string {
	s.t.Helper()
	var ids []string
	s.waitUntil(fmt.Sprintf("GET /v1/workers lists %d workers", n), func() bool {
		var ws []struct{ ID string }
		if s.request(http.MethodGet, "/v1/workers", nil, &ws) != http.StatusOK || len(ws) != n {
			return false
		}
		ids = ids[:0]
		for _, w := range ws {
			ids = append(ids, w.ID)
		}
		return true
	})
	return ids
}

// waitHealthy waits until n containers of the project (of service, if not
// "") are up and every one is healthy by the healthcheck the compose file gave it. Podman
// schedules healthchecks with systemd timers, and there may be no systemd:
// the test runs each container's configured check with `podman
// healthcheck run`, as a timer would, until it passes.
func (s *stack) waitHealthy(n int, service string) {
	s.t.Helper()
	args := []string{"ps", "--filter", "label=io.podman.compose.project=" + s.project, "--filter", "status=running", "--format", "{{.Names}}"}
	if service != "" {
		args = append(args, "--filter", "name="+s.project+"_"+service+"_")
	}
	var names []string
	s.waitUntil(fmt.Sprintf("%d containers run", n), func() bool {
		out, err := exec.CommandContext(s.ctx, "podman", args...).Output()
		names = strings.Fields(string(out))
		return err == nil && len(names) == n
	})
	for _, name := range names {
		out, err := exec.CommandContext(s.ctx, "podman", "inspect", "--format", "{{json .Config.Healthcheck.Test}}", name).Output()
		if err != nil || !strings.Contains(string(out), "CMD") {
			s.t.Fatalf("%s has no healthcheck from the compose file: %s %v", name, out, err)
		}
		s.waitUntil(fmt.Sprintf("%s is healthy by its healthcheck %s", name, strings.TrimSpace(string(out))), func() bool {
			exec.CommandContext(s.ctx, "podman", "healthcheck", "run", name).Run()
			status, err := exec.CommandContext(s.ctx, "podman", "inspect", "--format", "{{.State.Health.Status}}", name).Output()
			return err == nil && strings.TrimSpace(string(status)) == "healthy"
		})
	}
}

type runRecord struct {
	Status string `json:"status"`
	Error  string `json:"error"`
}

func (s *stack) submit(body map[string]any) string {
	s.t.Helper()
	var r struct {
		RunID string `json:"run_id"`
	}
	if code := s.request(http.MethodPost, "/v1/runs", body, &r); code != http.StatusAccepted {
		s.t.Fatalf("POST /v1/runs: %d", code)
	}
	return r.RunID
}

func (s *stack) record(id string) runRecord {
	var r runRecord
	s.request(http.MethodGet, "/v1/runs/"+id, nil, &r)
	return r
}

func (s *stack) waitRun(id string) runRecord {
	s.t.Helper()
	var r runRecord
	s.waitUntil("run "+id+" ends", func() bool {
		r = s.record(id)
		return r.Status == "succeeded" || r.Status == "failed" || r.Status == "cancelled"
	})
	return r
}

// staticBusybox is a statically linked busybox (Debian's busybox-static),
// which answers as wget under that name; "" if there is none.
// podmanRuns runs one container (busybox true, from a root file system
// holding only busybox), so a podman that is installed but cannot start
// containers (no user namespaces, no cgroups, no runtime) is found before
// a build of several minutes rather than after it.
func podmanRuns(busybox string) error {
	dir, err := os.MkdirTemp("", "formica-podman-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	data, err := os.ReadFile(busybox)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "busybox"), data, 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), podmanProbeTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "podman", "run", "--rm", "--network", "none", "--rootfs", dir, "/busybox", "true").CombinedOutput()
	if ctx.Err() != nil {
		return fmt.Errorf("podman run did not finish within %s", podmanProbeTimeout)
	}
	if err != nil {
		return fmt.Errorf("podman run: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// podmanProbeTimeout bounds podmanRuns; a working podman takes a second.
const podmanProbeTimeout = 2 * time.Minute

func staticBusybox() string {
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		static := true
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				static = false
			}
		}
		f.Close()
		if static {
			return p
		}
	}
	return ""
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(from)
	writeFileMode(t, to, b, fi.Mode().Perm())
}

func writeFile(t *testing.T, path, s string) { writeFileMode(t, path, []byte(s), 0o644) }

func writeFileMode(t *testing.T, path string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, mode); err != nil {
		t.Fatal(err)
	}
}
