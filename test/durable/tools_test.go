package durable_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The API as its clients' tools see it: the npm packages @redocly/cli,
// openapi-typescript, typescript and eventsource, installed by .ci/run with
// `npm install --prefix "$FORMICA_NPM_TOOLS"`, run against a coordinator's
// served document and event stream.

// envNPMTools names the npm prefix the client tools are installed under.
const envNPMTools = "FORMICA_NPM_TOOLS"

// toolTimeout bounds each tool's run (npx-free: the packages are local).
const toolTimeout = 2 * time.Minute

// npmTools returns the node_modules directory of the client tools,
// skipping the test when envNPMTools is unset outside CI (and failing it
// in CI, where .ci/run sets it).
func npmTools(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(envNPMTools)
	if dir == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is unset in CI: .ci/run installs the API client tools and sets it", envNPMTools)
		}
		t.Skipf("%s is unset: install the API client tools with `npm install --prefix DIR @redocly/cli openapi-typescript typescript eventsource` and set %s=DIR",
			envNPMTools, envNPMTools)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node not found: %v", err)
	}
	mods := filepath.Join(dir, "node_modules")
	for _, f := range []string{".bin/redocly", ".bin/openapi-typescript", ".bin/tsc", "eventsource/package.json"} {
		if _, err := os.Stat(filepath.Join(mods, f)); err != nil {
			t.Fatalf("%s=%s lacks a tool: %v", envNPMTools, dir, err)
		}
	}
	return mods
}

// runTool runs a command in dir, bounded by toolTimeout, and returns its
// combined output and error.
func runTool(t *testing.T, dir, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	// No update checks or telemetry from the tools.
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_UPDATE_NOTIFIER=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// servedDocument saves the coordinator's /v1/openapi.json in dir.
func servedDocument(t *testing.T, c *coord, dir string) string {
	t.Helper()
	code, doc, err := c.do(http.MethodGet, "/v1/openapi.json", nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: %d %v", code, err)
	}
	path := filepath.Join(dir, "openapi.json")
	if err := os.WriteFile(path, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRedoclyLintsServedDocument: `redocly lint` finds no error in the
// document a coordinator serves.
func TestRedoclyLintsServedDocument(t *testing.T) {
	t.Parallel()
	mods := npmTools(t)
	c := startCoord(t, coordOpts{token: "tools-token"})
	dir := t.TempDir()
	doc := servedDocument(t, c, dir)
	out, err := runTool(t, dir, filepath.Join(mods, ".bin/redocly"), "lint", doc)
	if err != nil {
		t.Fatalf("redocly lint: %v\n%s", err, out)
	}
	if !strings.Contains(out, "Your API description is valid") {
		t.Fatalf("redocly lint did not call the document valid:\n%s", out)
	}
	t.Logf("redocly lint:\n%s", out)
}

// tsClient builds requests from the types openapi-typescript generates: a
// submission with model_args, harness and budget, and the answers' types.
// With the free-form sections typed Record<string, never> it does not
// compile.
const tsClient = `import type { components, paths } from "./api";

type SubmitRequest = components["schemas"]["SubmitRequest"];
type Accepted = paths["/v1/runs"]["post"]["responses"]["202"]["content"]["application/json"];
type Conflict = paths["/v1/runs"]["post"]["responses"]["409"]["content"]["application/json"];
type Run = components["schemas"]["Run"];
type Event = components["schemas"]["Event"];

export const body: SubmitRequest = {
  task: "Summarise the repository",
  id: "ts-client-1",
  agent: {
    name: "formica",
    model: "sim",
    model_args: { temperature: 0.2 },
    tools: ["read_file", "agent"],
    harness: { cwd: "repo", permissions: { default: "ask" } },
    budget: { tokens: 100000 },
  },
  budget: { tokens: 200000, usd: 1.5, duration: "10m", spawns: 20 },
  timeout: "30m",
};

export async function submit(base: string, token: string): Promise<Accepted> {
  const res = await fetch(base + "/v1/runs", {
    method: "POST",
    headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  if (res.status === 409) {
    const e = (await res.json()) as Conflict;
    throw new Error(e.error.code + ": " + e.error.message);
  }
  return (await res.json()) as Accepted;
}

export const ended = (r: Run): boolean => r.status === "succeeded" || r.status === "failed" || r.status === "cancelled";
export const finishes = (e: Event): boolean => e.type === "run.finished";
`

// TestTypeScriptClientCompiles: openapi-typescript generates types from
// the served document, and a client typed by them compiles under
// `tsc --strict`; the same client fails to compile once model_args is typed
// as an object with no keys, so the check has teeth.
func TestTypeScriptClientCompiles(t *testing.T) {
	t.Parallel()
	mods := npmTools(t)
	c := startCoord(t, coordOpts{token: "tools-token"})
	dir := t.TempDir()
	doc := servedDocument(t, c, dir)
	api := filepath.Join(dir, "api.d.ts")
	if out, err := runTool(t, dir, filepath.Join(mods, ".bin/openapi-typescript"), doc, "-o", api); err != nil {
		t.Fatalf("openapi-typescript: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "client.ts"), []byte(tsClient), 0o644); err != nil {
		t.Fatal(err)
	}
	tsc := func() (string, error) {
		return runTool(t, dir, filepath.Join(mods, ".bin/tsc"), "--noEmit", "--strict",
			"--target", "es2022", "--module", "esnext", "--moduleResolution", "bundler", "client.ts")
	}
	if out, err := tsc(); err != nil {
		t.Fatalf("tsc --strict: %v\n%s", err, out)
	}

	generated, err := os.ReadFile(api)
	if err != nil {
		t.Fatal(err)
	}
	modelArgs := regexp.MustCompile(`model_args\?: \{[^}]*\};`)
	if !modelArgs.Match(generated) {
		t.Fatalf("api.d.ts types model_args unlike `model_args?: {...};`:\n%s", generated)
	}
	keyless := modelArgs.ReplaceAll(generated, []byte("model_args?: Record<string, never>;"))
	if err := os.WriteFile(api, keyless, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := tsc()
	line, _, _ := strings.Cut(tsClient, "model_args:")
	at := fmt.Sprintf("client.ts(%d,", strings.Count(line, "\n")+1) // tsc's error on that line
	if err == nil || !strings.Contains(out, at) {
		t.Fatalf("the client compiled with model_args typed Record<string, never> (%v):\n%s", err, out)
	}
}

// eventSourceScript follows a run's events with the eventsource package,
// the bearer token sent through its fetch option, and exits 0 once
// run.finished arrives for the run; 2 if it has not within the time given.
const eventSourceScript = `import { EventSource } from "eventsource";

const [url, token, runID, ms] = process.argv.slice(2);
const timer = setTimeout(() => {
  console.error("no run.finished within " + ms + " ms");
  process.exit(2);
}, Number(ms));
const es = new EventSource(url, {
  fetch: (input, init) =>
    fetch(input, { ...init, headers: { ...init.headers, Authorization: "Bearer " + token } }),
});
es.addEventListener("run.finished", (e) => {
  const ev = JSON.parse(e.data);
  if (ev.run_id !== runID) return;
  console.log("run.finished " + ev.status + " at event " + e.lastEventId);
  clearTimeout(timer);
  es.close();
  process.exit(0);
});
es.onerror = (err) => console.error("eventsource: " + (err.message ?? err.type));
`

// TestEventSourceSeesRunFinished: the npm eventsource package, given the
// bearer token, follows a real run's stream and its
// addEventListener('run.finished') fires.
func TestEventSourceSeesRunFinished(t *testing.T) {
	t.Parallel()
	mods := npmTools(t)
	c := startCoord(t, coordOpts{token: "tools-token"})
	c.startWorker("w1", 4)
	dir := t.TempDir()
	if err := os.Symlink(mods, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "follow.mjs"), []byte(eventSourceScript), 0o644); err != nil {
		t.Fatal(err)
	}
	id := c.submit(map[string]any{"task": "Plan:\n- a\n- b", "agent": simAgent(100)})
	out, err := runTool(t, dir, "node", "follow.mjs", c.api+"/v1/runs/"+id+"/events", c.token, id,
		strconv.FormatInt(runTimeout.Milliseconds(), 10))
	if err != nil {
		t.Fatalf("node follow.mjs: %v\n%s", err, out)
	}
	if !strings.Contains(out, "run.finished succeeded") {
		t.Fatalf("node follow.mjs:\n%s", out)
	}
	t.Logf("node follow.mjs: %s", out)
	if rec := c.waitFinal(id); rec.Status != "succeeded" {
		t.Fatalf("run %s: %s", id, rec.Status)
	}
}
