package durable_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/journal"
	"github.com/formica-run/formica/test/proc"
)

// TestAtMostOnceCoordinatorKilled: the root's bash call leaves a mark and
// sleeps 8 s; its coordinator is killed while it runs and restarted, the
// worker stops the orphaned thread, and the run is delivered again.
//   - Under harness.at_most_once [bash] the call is not run again: the
//     mark has one line, the run succeeds, the model was told the call is
//     in doubt, and the transcript, the tool.result event and the record
//     say in_doubt.
//   - Without it the call runs again (at least once): two lines.
//   - With in_doubt: ask, a person is asked through the approvals (the
//     approval says in_doubt): deny reports it in doubt (one line), allow
//     runs it again (two lines).
func TestAtMostOnceCoordinatorKilled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		harness map[string]any
		decide  string // a person's decision on the call in doubt, if asked
		marks   int
		inDoubt bool
		// entries are the statuses of the call's journal entries.
		entries string
	}{
		{"at_most_once", map[string]any{"at_most_once": []string{"bash"}}, "", 1, true, "started,in_doubt"},
		{"at_least_once", map[string]any{"at_most_once": []string{"write_file"}}, "", 2, false, "ok"},
		{"ask_deny", map[string]any{"at_most_once": []string{"bash"}, "in_doubt": "ask"}, "deny", 1, true, "started,in_doubt"},
		{"ask_allow", map[string]any{"at_most_once": []string{"bash"}, "in_doubt": "ask"}, "allow", 2, false, "started,started,ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rootTask := "pay once (" + tc.name + ")"
			srv := newChatServer(t, func(task string, req jRequest) jAnswer {
				if task == rootTask && req.turn() == 0 {
					return jAnswer{calls: []call{bashCall("echo paid >> mark.txt; sleep 8; echo slept")}}
				}
				return jAnswer{text: "done: " + req.toolResults()}
			})
			c := startCoord(t, coordOpts{})
			c.startChatWorker("w1", 4, srv)
			agent := chatAgent()
			h := agent["harness"].(map[string]any)
			for k, v := range tc.harness {
				h[k] = v
			}
			id := c.submit(map[string]any{"task": rootTask, "agent": agent})
			mark := filepath.Join(c.cwd, "mark.txt")
			proc.WaitUntil(t, runTimeout, "bash left its mark", func() bool {
				data, _ := os.ReadFile(mark)
				return len(data) > 0
			})
			c.kill9()
			c.restart()

			if tc.decide != "" {
				a := c.waitApproval(id)
				if !a.InDoubt || a.Tool != "bash" || !strings.Contains(a.Arguments, "mark.txt") || a.ThreadPath != "formica" {
					t.Errorf("approval %+v; want the bash call of formica, in doubt", a)
				}
				var decided struct{ Decision string }
				c.call(http.StatusOK, http.MethodPost, "/v1/approvals/"+a.ID, map[string]string{"decision": tc.decide}, &decided)
			}

			rec := c.waitFinal(id)
			if rec.Status != event.Succeeded || rec.Attempts != 2 {
				t.Fatalf("run %s: %s (%s), %d attempts; want succeeded on attempt 2", id, rec.Status, rec.Error, rec.Attempts)
			}
			data, err := os.ReadFile(mark)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(data), "\n"); n != tc.marks {
				t.Errorf("mark.txt has %d lines, want %d", n, tc.marks)
			}
			inDoubt := 0
			if tc.inDoubt {
				inDoubt = 1
			}
			if told := strings.Contains(rec.Output, "Tool call in doubt"); told != tc.inDoubt {
				t.Errorf("output %q: told in doubt %v, want %v", rec.Output, told, tc.inDoubt)
			}
			tr, _ := c.transcript(id, journal.RootID(id))
			statuses := []string{}
			for _, e := range tr.Entries {
				if e.Kind == journal.KindTool {
					statuses = append(statuses, e.ToolStatus)
				}
			}
			if tr.InDoubt != inDoubt || strings.Join(statuses, ",") != tc.entries {
				t.Errorf("transcript: %d calls in doubt, tool entries %v; want %d, %s", tr.InDoubt, statuses, inDoubt, tc.entries)
			}
			if len(rec.Threads) == 0 || rec.Threads[0].InDoubt != inDoubt {
				t.Errorf("record threads %+v; want the root with %d in doubt", rec.Threads, inDoubt)
			}
			events, _, _ := c.sse(id, 0, 0)
			n := 0
			for _, e := range events {
				if e.e.Type == event.ToolResult && e.e.InDoubt {
					n++
				}
			}
			if n != inDoubt {
				t.Errorf("%d tool.result events in doubt, want %d", n, inDoubt)
			}
		})
	}
}
