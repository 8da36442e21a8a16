package browser_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model/quotaserver"
)

// TestQuotaWaitShown: a helper whose model call waits for its endpoint's
// quota (one call in flight allowed, the other helper's holds it) shows a
// "waiting for quota" chip on its row, which goes once it got its share.
func TestQuotaWaitShown(t *testing.T) {
	srv, err := quotaserver.Start(quotaserver.Config{Format: quotaserver.OpenAI, Latency: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf("endpoints:\n  q:\n    format: openai\n    base_url: %s\n    in_flight: 1\n",
		srv.BaseURL())), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newPage(t)
	c := startCoord(t, coordOpts{})
	c.env = []string{"FORMICA_PROVIDERS=" + file}
	c.startWorker("w1", 4)
	id := c.submit(map[string]any{"id": "quota-1", "task": "fanout 2", "agent": "name: root\nmodel: q/m\ntools: [agent]\n"})

	p.open(c.api + "/#/runs/" + id)
	p.wait("a helper waits for quota", `[...document.querySelectorAll('[data-thread-path^="root/"] [data-quota-wait]')].some(e =>
		e.dataset.quotaWait.includes('waiting for quota of q') && e.innerText === 'waiting for quota')`)
	p.screenshot(t.Name())
	rec := c.waitFinal(id)
	if rec.Status != event.Succeeded {
		t.Fatalf("run %s: %s", rec.Status, rec.Error)
	}
	p.wait("no chip once the run is over", `document.querySelector('#tree').dataset.final === 'true' &&
		document.querySelector('[data-quota-wait]') === null`)
}
