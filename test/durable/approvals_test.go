package durable_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/api"
	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/test/proc"
)

// approvalScript writes a scripted model for the tree root → a → b → c in
// which c, at depth 3, calls write_file (which the default agent asks
// about), then answers; each parent spawns its child, then answers. tag
// keeps scripts of runs sharing a coordinator apart.
func approvalScript(t *testing.T, tag string) (path, args string) {
	t.Helper()
	args = fmt.Sprintf(`{"path":"out-%s.txt","content":"written by c (%s)"}`, tag, tag)
	script := fmt.Sprintf(`responses:
  - when: leaf-%[1]s
    tool_calls:
      - name: write_file
        arguments: '%[2]s'
  - when: leaf-%[1]s
    text: c finished
  - when: mid-b-%[1]s
    tool_calls: [{name: agent, arguments: {name: c, task: leaf-%[1]s}}]
  - when: mid-b-%[1]s
    text: b finished
  - when: mid-a-%[1]s
    tool_calls: [{name: agent, arguments: {name: b, task: mid-b-%[1]s}}]
  - when: mid-a-%[1]s
    text: a finished
  - when: root-%[1]s
    tool_calls: [{name: agent, arguments: {name: a, task: mid-a-%[1]s}}]
  - when: root-%[1]s
    text: root finished
`, tag, args)
	return writeFile(t, "script-"+tag+".yaml", script), args
}

// waitApproval waits until GET /v1/approvals lists an approval of run and
// returns it.
func (c *coord) waitApproval(run string) api.Approval {
	c.t.Helper()
	var found api.Approval
	proc.WaitUntil(c.t, runTimeout, "an approval of run "+run+" is listed", func() bool {
		var list []api.Approval
		c.getJSON("/v1/approvals", &list)
		for _, a := range list {
			if a.RunID == run {
				found = a
				return true
			}
		}
		return false
	})
	return found
}

// checkApproval holds a listed approval to what c asked.
func checkApproval(t *testing.T, a api.Approval, run, args string) {
	t.Helper()
	if a.ID == "" || a.RunID != run || a.ThreadPath != "formica/a/b/c" || a.Tool != "write_file" || a.Arguments != args || a.RequestedAt.IsZero() {
		t.Errorf("approval %+v; want run %s, thread formica/a/b/c, write_file %s", a, run, args)
	}
}

// resolved returns the run's approval.resolved event.
func (c *coord) resolved(run string) event.Event {
	c.t.Helper()
	events, _, _ := c.sse(run, 0, 0)
	for _, e := range events {
		if e.e.Type == event.ApprovalResolved {
			return e.e
		}
	}
	c.t.Errorf("run %s has no approval.resolved event", run)
	return event.Event{}
}

// TestApprovalsOfQueuedRuns: a helper at depth 3 of a queued run calls
// write_file, which asks. The request is held for a person: listed by GET
// /v1/approvals and `formica approvals --json` with the run, the thread
// path, the tool and its exact arguments, until it is answered over the API
// (allow: the file is written in the coordinator's --cwd), by `formica
// approve --deny`, or not at all (denied after --approval-timeout). Each
// run goes on and succeeds.
func TestApprovalsOfQueuedRuns(t *testing.T) {
	t.Parallel()
	t.Run("allow and deny", func(t *testing.T) {
		t.Parallel()
		c := startCoord(t, coordOpts{approvalTimeout: "2m"})
		c.startWorker("w1", 8)

		// Allowed over the API; submitted by the CLI.
		allowScript, allowArgs := approvalScript(t, "allow")
		r := c.cli("submit", "--model", "scripted:"+allowScript, "root-allow")
		if r.code != 0 {
			t.Fatalf("formica submit: exit %d: %s", r.code, r.stderr)
		}
		allowRun := strings.TrimSpace(r.stdout)
		// Denied by the CLI; submitted over the API.
		denyScript, denyArgs := approvalScript(t, "deny")
		denyRun := c.submit(map[string]any{"task": "root-deny", "model": "scripted:" + denyScript})

		allow, deny := c.waitApproval(allowRun), c.waitApproval(denyRun)
		checkApproval(t, allow, allowRun, allowArgs)
		checkApproval(t, deny, denyRun, denyArgs)
		var viaCLI []api.Approval
		c.cliJSON(&viaCLI, "approvals", "--json")
		for _, want := range []api.Approval{allow, deny} {
			found := false
			for _, a := range viaCLI {
				if a.ID == want.ID {
					found = true
					if !a.RequestedAt.Equal(want.RequestedAt) || a.RunID != want.RunID || a.ThreadPath != want.ThreadPath || a.Tool != want.Tool || a.Arguments != want.Arguments {
						t.Errorf("formica approvals: %+v; the API lists %+v", a, want)
					}
				}
			}
			if !found {
				t.Errorf("formica approvals --json does not list %s: %+v", want.ID, viaCLI)
			}
		}
		// Both runs wait for their answers.
		for _, id := range []string{allowRun, denyRun} {
			if rec := c.record(id); rec.Status != event.Running {
				t.Errorf("run %s is %s while its approval waits", id, rec.Status)
			}
		}

		var decided api.DecideResponse
		c.call(http.StatusOK, http.MethodPost, "/v1/approvals/"+allow.ID, map[string]string{"decision": "allow"}, &decided)
		if decided.ID != allow.ID || decided.Decision != "allow" {
			t.Errorf("POST /v1/approvals/%s: %+v", allow.ID, decided)
		}
		if r := c.cli("approve", deny.ID, "--deny"); r.code != 0 {
			t.Errorf("formica approve %s --deny: exit %d: %s", deny.ID, r.code, r.stderr)
		}
		// A second answer is a conflict.
		if code, body, _ := c.do(http.MethodPost, "/v1/approvals/"+allow.ID, map[string]string{"decision": "deny"}); code != http.StatusConflict {
			t.Errorf("second decision on %s: %d %s, want 409", allow.ID, code, body)
		}

		for _, run := range []string{allowRun, denyRun} {
			if rec := c.waitFinal(run); rec.Status != event.Succeeded || rec.Output != "root finished" || len(rec.Threads) != 4 {
				t.Errorf("run %s: %s (%s), output %q, %d threads", run, rec.Status, rec.Error, rec.Output, len(rec.Threads))
			}
		}
		data, err := os.ReadFile(filepath.Join(c.cwd, "out-allow.txt"))
		if err != nil || string(data) != "written by c (allow)" {
			t.Errorf("the allowed write_file did not write out-allow.txt in the coordinator's --cwd: %q, %v", data, err)
		}
		if _, err := os.Stat(filepath.Join(c.cwd, "out-deny.txt")); !os.IsNotExist(err) {
			t.Errorf("the denied write_file wrote out-deny.txt (%v)", err)
		}
		if e := c.resolved(allowRun); e.Decision != "allow" {
			t.Errorf("allowed run: approval.resolved %+v", e)
		}
		if e := c.resolved(denyRun); e.Decision != "deny" || e.Reason != "denied by a user" {
			t.Errorf("denied run: approval.resolved %+v", e)
		}
		var left []api.Approval
		c.call(http.StatusOK, http.MethodGet, "/v1/approvals", nil, &left)
		if len(left) != 0 {
			t.Errorf("approvals still listed after both were answered: %+v", left)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		c := startCoord(t, coordOpts{approvalTimeout: "1s"})
		c.startWorker("w1", 8)
		script, args := approvalScript(t, "timeout")
		run := c.submit(map[string]any{"task": "root-timeout", "model": "scripted:" + script})
		a := c.waitApproval(run)
		checkApproval(t, a, run, args)
		rec := c.waitFinal(run)
		if rec.Status != event.Succeeded || rec.Output != "root finished" {
			t.Errorf("run %s: %s (%s), output %q", run, rec.Status, rec.Error, rec.Output)
		}
		if e := c.resolved(run); e.Decision != "deny" || e.Reason != "no decision within 1s" {
			t.Errorf("approval.resolved %+v; want deny, no decision within 1s", e)
		}
		if _, err := os.Stat(filepath.Join(c.cwd, "out-timeout.txt")); !os.IsNotExist(err) {
			t.Errorf("the timed-out write_file wrote its file (%v)", err)
		}
		if code, body, _ := c.do(http.MethodPost, "/v1/approvals/"+a.ID, map[string]string{"decision": "allow"}); code != http.StatusConflict {
			t.Errorf("allowing the timed-out approval: %d %s, want 409", code, body)
		}
		var left []api.Approval
		c.call(http.StatusOK, http.MethodGet, "/v1/approvals", nil, &left)
		if len(left) != 0 {
			t.Errorf("approvals still listed after the timeout: %+v", left)
		}
	})
}
