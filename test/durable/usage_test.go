package durable_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/formica-run/formica/test/proc"
)

// usageCase is one command line and how it must end: its exit code and, on
// stderr, a line containing want (bad usage and failures: exactly one line,
// "formica: <command>: <why>").
type usageCase struct {
	name string
	env  []string // added to the cluster's
	args []string
	code int
	want string // part of the one stderr line (codes 1 and 2), or of stdout (0)
}

// TestCommandExitCodes runs every command of the CLI, built, against a real
// coordinator and worker: each bad usage exits 2 with one clear line, each
// failure 1, each success 0; the API answers the same mistakes with 400 and
// the same words.
func TestCommandExitCodes(t *testing.T) {
	c := startCoord(t, coordOpts{})
	c.startWorker("w1", 4)
	dir := t.TempDir()
	teleport := filepath.Join(dir, "teleport.yaml")
	os.WriteFile(teleport, []byte("name: mover\nmodel: sim\ntools: [teleport]\n"), 0o644)
	unauthorized := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":{"message":"Incorrect API key","type":"invalid_request_error"}}`))
	}))
	defer unauthorized.Close()
	long := strings.Repeat("x", 65)

	// A finished run to get, watch and resubmit.
	if r := c.cli("submit", "--id", "done-1", "--wait", "Plan:\n- a\n- b"); r.code != 0 {
		t.Fatalf("submit --wait: exit %d\n%s", r.code, r.stderr)
	}

	cases := []usageCase{
		{"no command", nil, nil, 2, "Usage: formica"},
		{"unknown command", nil, []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"help", nil, []string{"help"}, 0, "Commands:"},

		{"run without task", nil, []string{"run"}, 2, "formica: run: no task given"},
		{"run unknown flag", nil, []string{"run", "--frobnicate", "x"}, 2, "formica: run: flag provided but not defined: -frobnicate"},
		{"run bad --approve", nil, []string{"run", "--approve", "maybe", "x"}, 2, `--approve must be ask, allow or deny`},
		{"run unknown provider", nil, []string{"run", "--model", "gemini:pro", "x"}, 2, `unknown model provider "gemini"`},
		{"run model without provider", nil, []string{"run", "--model", "gpt-4o", "x"}, 2, "e.g. openai:gpt-4o"},
		{"run provider without model", nil, []string{"run", "--model", "openai", "x"}, 2, "names no model"},
		{"run missing key", nil, []string{"run", "--model", "openai:gpt-4o", "--cwd", dir, "x"}, 2, "needs OPENAI_API_KEY"},
		{"run unknown tool", nil, []string{"run", "--agent", teleport, "--cwd", dir, "x"}, 2, `unknown tool "teleport"`},
		{"run zero threads", nil, []string{"run", "--agent-max-threads", "0", "x"}, 2, "--agent-max-threads"},
		{"run missing cwd", nil, []string{"run", "--cwd", filepath.Join(dir, "nope"), "x"}, 2, "is not a directory"},
		{"run provider refuses", []string{"OPENAI_BASE_URL=" + unauthorized.URL + "/v1", "OPENAI_API_KEY=wrong"},
			[]string{"run", "--model", "openai:m", "--cwd", dir, "hello"}, 1, "formica: run failed"},
		{"run succeeds", nil, []string{"run", "--cwd", dir, "Plan:\n- a"}, 0, "done: a"},

		{"submit without task", nil, []string{"submit"}, 2, "formica: submit: no task given"},
		{"submit id with space", nil, []string{"submit", "--id", "two words", "x"}, 2, `invalid id "two words"`},
		{"submit id with =", nil, []string{"submit", "--id", "a=b", "x"}, 2, `invalid id "a=b"`},
		{"submit id too long", nil, []string{"submit", "--id", long, "x"}, 2, "1 to 64 letters"},
		{"submit unknown provider", nil, []string{"submit", "--model", "gemini:pro", "x"}, 2, `unknown model provider "gemini"`},
		{"submit unknown tool", nil, []string{"submit", "--agent", teleport, "x"}, 2, `unknown tool "teleport"`},
		{"submit negative limit", nil, []string{"submit", "--agent-max-depth", "-1", "x"}, 2, "agent_max_depth must not be negative"},
		{"submit same id, other task", nil, []string{"submit", "--id", "done-1", "another task"}, 2, "run id done-1 already used by a different submission"},
		{"submit same id, same task", nil, []string{"submit", "--id", "done-1", "Plan:\n- a\n- b"}, 0, "done-1"},
		{"submit without cluster", []string{"FORMICA_NATS="}, []string{"submit", "x"}, 2, "no cluster given"},
		{"submit succeeds", nil, []string{"submit", "--id", "new-1", "x"}, 0, "new-1"},

		{"get without id", nil, []string{"get"}, 2, "formica: get: give exactly one run id"},
		{"get bad id", nil, []string{"get", "a=b"}, 2, `invalid id "a=b"`},
		{"get missing run", nil, []string{"get", "missing-1"}, 1, "formica: get: run missing-1 not found"},
		{"get succeeds", nil, []string{"get", "done-1"}, 0, "succeeded"},

		{"runs bogus status", nil, []string{"runs", "--status", "bogus"}, 2, `formica: runs: status "bogus" is not one of queued, running, succeeded, failed, cancelled`},
		{"runs negative limit", nil, []string{"runs", "--limit", "-5"}, 2, "limit -5 is not a positive number"},
		{"runs bad limit", nil, []string{"runs", "--limit", "many"}, 2, "invalid value"},
		{"runs succeeds", nil, []string{"runs"}, 0, "done-1"},

		{"watch without id", nil, []string{"watch"}, 2, "give exactly one run id"},
		{"watch missing run", nil, []string{"watch", "missing-1"}, 1, "formica: watch: run missing-1 not found"},
		{"watch succeeds", nil, []string{"watch", "done-1"}, 0, "done: a"},

		{"cancel without id", nil, []string{"cancel"}, 2, "give exactly one run id"},
		{"cancel missing run", nil, []string{"cancel", "missing-1"}, 1, "run missing-1 not found"},
		{"cancel finished run", nil, []string{"cancel", "done-1"}, 1, "run done-1 already succeeded"},

		{"resume without id", nil, []string{"resume"}, 2, "give exactly one run id"},
		{"resume bad id", nil, []string{"resume", "a=b"}, 2, `invalid id "a=b"`},
		{"resume missing run", nil, []string{"resume", "missing-1"}, 1, "formica: resume: run missing-1 not found"},
		{"resume succeeded run", nil, []string{"resume", "done-1"}, 1, "formica: resume: run done-1 is succeeded; only failed or cancelled runs resume"},

		{"transcript without id", nil, []string{"transcript"}, 2, "formica: transcript: give a run id"},
		{"transcript missing run", nil, []string{"transcript", "missing-1"}, 1, "formica: transcript: run missing-1 not found"},
		{"transcript missing thread", nil, []string{"transcript", "done-1", "formica/zzz"}, 2, `run done-1 has no thread "formica/zzz"`},
		{"transcript succeeds", nil, []string{"transcript", "done-1"}, 0, "thread formica"},
		{"transcript by path", nil, []string{"transcript", "done-1", "formica/a"}, 0, "thread formica/a "},
		{"transcript by the root's alias", nil, []string{"transcript", "done-1", "root/a"}, 0, "thread formica/a "},

		{"submit past a ceiling", nil, []string{"submit", "--agent-max-threads", "300", "x"}, 2,
			"agent_max_threads 300 is above the ceiling of 256 (coordinator --max-agent-threads)"},

		{"approvals succeeds", nil, []string{"approvals"}, 0, "ID"},
		{"approve without decision", nil, []string{"approve", "ap-1"}, 2, "give exactly one of --allow and --deny"},
		{"approve missing approval", nil, []string{"approve", "ap-1", "--allow"}, 1, "formica: approve:"},

		{"workers succeeds", nil, []string{"workers"}, 0, "w1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// formica run is a run of its own on this machine: given
			// FORMICA_NATS (its --nats) it would run on the cluster instead.
			var env []string
			if len(tc.args) == 0 || tc.args[0] != "run" {
				env = []string{"FORMICA_NATS=" + c.url, "FORMICA_NATS_CREDS=" + c.clientCreds()}
			}
			env = append(env, tc.env...)
			p := proc.StartWith(t, proc.Options{Env: env}, "formica "+tc.name, bin.formica, tc.args...)
			code := p.Wait(t, cliTimeout)
			stdout, stderr := p.Stdout.String(), p.Stderr.String()
			if code != tc.code {
				t.Fatalf("formica %q: exit %d, want %d\nstdout: %s\nstderr: %s", tc.args, code, tc.code, stdout, stderr)
			}
			switch {
			case tc.code == 0 && tc.args != nil && tc.args[0] != "help":
				if !strings.Contains(stdout, tc.want) {
					t.Errorf("stdout %q, want %q in it", stdout, tc.want)
				}
			case tc.args == nil || tc.args[0] == "help":
				if !strings.Contains(stdout+stderr, tc.want) {
					t.Errorf("output %q, want %q", stdout+stderr, tc.want)
				}
			case tc.code == 2:
				lines := errorLines(stderr, false)
				if len(lines) != 1 || !strings.HasPrefix(lines[0], "formica: ") || !strings.Contains(lines[0], tc.want) {
					t.Errorf("stderr %q, want exactly one line starting \"formica: \" with %q", stderr, tc.want)
				}
			default:
				lines := errorLines(stderr, true)
				if len(lines) != 1 || !strings.HasPrefix(lines[0], "formica: ") || !strings.Contains(lines[0], tc.want) {
					t.Errorf("stderr %q, want one line starting \"formica: \" with %q", stderr, tc.want)
				}
			}
		})
	}

	// The API refuses the same mistakes with the same words.
	for _, tc := range []struct {
		method, path string
		body         any
		status       int
		want         string
	}{
		{"GET", "/v1/runs?status=bogus", nil, 400, `status "bogus" is not one of queued, running, succeeded, failed, cancelled`},
		{"GET", "/v1/runs?limit=-5", nil, 400, "limit -5 is not a positive number"},
		{"POST", "/v1/runs", map[string]any{"task": "x", "model": "gemini:pro"}, 400, `unknown model provider "gemini"`},
		{"POST", "/v1/runs", map[string]any{"task": "x", "model": "gpt-4o"}, 400, "e.g. openai:gpt-4o"},
		{"POST", "/v1/runs", map[string]any{"task": "x", "agent": map[string]any{"name": "m", "tools": []string{"teleport"}}}, 400, `unknown tool "teleport"`},
		{"POST", "/v1/runs", map[string]any{"task": "x", "agent_max_threads": -1}, 400, "agent_max_threads must not be negative"},
		{"POST", "/v1/runs", map[string]any{"task": "x", "id": "a=b"}, 400, `invalid id "a=b"`},
		{"POST", "/v1/runs", map[string]any{"task": "another task", "id": "done-1"}, 409, "run id done-1 already used by a different submission"},
		{"POST", "/v1/runs", map[string]any{"task": "Plan:\n- a\n- b", "id": "done-1"}, 202, "done-1"},
		{"GET", "/v1/runs/missing-1", nil, 404, "run missing-1 not found"},
		{"POST", "/v1/runs/missing-1/resume", nil, 404, "run missing-1 not found"},
		{"POST", "/v1/runs/done-1/resume", nil, 409, "run done-1 is succeeded; only failed or cancelled runs resume"},
		{"POST", "/v1/runs", map[string]any{"task": "x", "agent_max_threads": 300}, 400,
			"agent_max_threads 300 is above the ceiling of 256 (coordinator --max-agent-threads)"},
	} {
		code, data, err := c.do(tc.method, tc.path, tc.body)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		var body struct {
			RunID string `json:"run_id"`
			Error struct{ Message string }
		}
		json.Unmarshal(data, &body)
		if code != tc.status || !strings.Contains(body.Error.Message+body.RunID, tc.want) {
			t.Errorf("%s %s %v: %d %s, want %d with %q", tc.method, tc.path, tc.body, code, data, tc.status, tc.want)
		}
	}
}

// errorLines are stderr's non-empty lines but the notice about the sim
// model; onlyErrors keeps only "formica: " lines (dropping the live tree).
func errorLines(stderr string, onlyErrors bool) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.TrimSpace(l) == "" || strings.Contains(l, "no model configured") {
			continue
		}
		if onlyErrors && !strings.HasPrefix(l, "formica: ") {
			continue
		}
		out = append(out, l)
	}
	return out
}
