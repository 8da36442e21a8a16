package browser_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
)

// TestApprovalsAllowAndDeny holds two tool calls for a person: each shows
// in the "needs you" strip and in Approvals; Allow lets its run finish,
// Deny makes the other thread see the deny text.
func TestApprovalsAllowAndDeny(t *testing.T) {
	p := newPage(t)
	base := fakeOpenAI(t)
	c := startCoord(t, coordOpts{model: "openai:fake"})
	c.env = []string{"OPENAI_BASE_URL=" + base, "OPENAI_API_KEY=sk-test"}
	c.startWorker("w1", 4)

	p.open(c.api + "/#/approvals")
	p.wait("the approvals view shows", `document.querySelector('#approvals') !== null`)

	allowRun := c.submit(map[string]any{"id": "allow-1", "task": "write:alpha"})
	asked := time.Now()
	p.wait("the approval is listed", fmt.Sprintf(`document.querySelector('[data-approval-id][data-run-id=%q]') !== null`, allowRun))
	shown := time.Since(asked)
	p.wait("the strip counts it", `document.querySelector('[data-need="approvals"] .n') && document.querySelector('[data-need="approvals"] .n').textContent === '1'`)
	card := eval[string](p, fmt.Sprintf(`document.querySelector('[data-approval-id][data-run-id=%q]').innerText`, allowRun))
	for _, want := range []string{"write_file", "formica", `"path": "alpha.txt"`, `"content": "written for alpha"`} {
		if !strings.Contains(card, want) {
			t.Errorf("approval card lacks %q:\n%s", want, card)
		}
	}
	t.Logf("approval shown %v after the run was submitted (the page polls every 400ms)", shown.Round(time.Millisecond))

	p.screenshot(t.Name() + "-pending")
	p.clickButton(fmt.Sprintf(`[data-approval-id][data-run-id=%q]`, allowRun), "Allow")
	p.wait("the answered approval leaves", fmt.Sprintf(`document.querySelector('[data-run-id=%q][data-approval-id]') === null`, allowRun))
	rec := c.waitFinal(allowRun)
	if rec.Status != event.Succeeded || !strings.Contains(rec.Output, "result:") || strings.Contains(rec.Output, "denied") {
		t.Errorf("allowed run: %s, output %q", rec.Status, rec.Output)
	}

	denyRun := c.submit(map[string]any{"id": "deny-1", "task": "write:beta"})
	p.wait("the second approval is listed", fmt.Sprintf(`document.querySelector('[data-approval-id][data-run-id=%q]') !== null`, denyRun))
	p.clickButton(fmt.Sprintf(`[data-approval-id][data-run-id=%q]`, denyRun), "Deny")
	p.wait("nothing waits any more", `document.querySelectorAll('[data-approval-id]').length === 0 && document.querySelector('#needs-you [data-need="approvals"]') === null`)
	rec = c.waitFinal(denyRun)
	root := rec.Threads[0]
	p.open(fmt.Sprintf("%s/#/runs/%s/threads/%s", c.api, denyRun, root.ID))
	p.wait("the thread saw the deny text", `[...document.querySelectorAll('.tool-result')].some(e => e.innerText.includes('denied by a user'))`)
	if !strings.Contains(rec.Output, "denied by a user") {
		t.Errorf("denied run's output %q: want the deny text the thread saw", rec.Output)
	}
}
