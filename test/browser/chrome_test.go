package browser_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// screenshotDir is where each test leaves its screenshot (CI keeps it).
const screenshotDir = "screenshots"

// page is one browser tab of a fresh, private browser.
type page struct {
	t   *testing.T
	ctx context.Context
	// timeout bounds each wait; default pageTimeout.
	timeout time.Duration
}

// newPage starts headless Chromium with a fresh user-data directory and
// opens a tab. The browser ends with the test, after its screenshot.
func newPage(t *testing.T) *page {
	t.Helper()
	needBrowser(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin.chromium),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	// Bound the whole browser session so a hung page cannot hang the suite.
	ctx, cancelTime := context.WithTimeout(ctx, 6*time.Minute)
	p := &page{t: t, ctx: ctx, timeout: pageTimeout}
	if err := chromedp.Do(ctx); err != nil { // start the browser now
		cancelTime()
		cancelTab()
		cancelAlloc()
		t.Fatalf("start chromium %s: %v", bin.chromium, err)
	}
	t.Cleanup(func() {
		p.screenshot(t.Name())
		cancelTime()
		cancelTab()
		cancelAlloc()
	})
	return p
}

// do runs actions on the tab, failing the test on an error.
func (p *page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	var err error
	// A live page re-renders as events arrive: a node found by a query can
	// be replaced before the click reaches it, so such a step is tried again.
	for attempt := 0; attempt < 5; attempt++ {
		if err = chromedp.Do(p.ctx, steps...); err == nil || !strings.Contains(err.Error(), "Could not find node") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		p.fail(what, err)
	}
}

func (p *page) fail(what string, err error) {
	p.t.Helper()
	html, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector('main') ? document.querySelector('main').innerText.slice(0, 3000) : ''`))
	p.t.Fatalf("%s: %v\npage text:\n%s", what, err, html)
}

func (p *page) open(url string) { p.t.Helper(); p.do("open "+url, chromedp.Navigate(url)) }

// wait polls a JavaScript predicate until it is truthy, bounded.
// A navigation while it polls starts the poll again on the new document.
func (p *page) wait(what, predicate string) {
	p.t.Helper()
	deadline := time.Now().Add(p.timeout)
	for {
		_, err := chromedp.Run(p.ctx, chromedp.Poll[chromedp.Void](predicate,
			chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(time.Until(deadline))))
		if err == nil {
			return
		}
		if !navigated(err) || time.Now().After(deadline) {
			p.fail("waiting until "+what, err)
		}
	}
}

// navigated reports whether err says only that the page moved on.
func navigated(err error) bool {
	s := err.Error()
	return strings.Contains(s, "navigated or closed") || strings.Contains(s, "context was destroyed") ||
		strings.Contains(s, "Cannot find context")
}

// eval returns the value of a JavaScript expression.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.fail("evaluate "+expr, err)
	}
	return v
}

func (p *page) click(sel string) {
	p.t.Helper()
	p.do("click "+sel, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

// clickButton clicks the button with this accessible name inside the
// element matching scope.
func (p *page) clickButton(scope, name string) {
	p.t.Helper()
	p.do(fmt.Sprintf("click %q in %s", name, scope), chromedp.Click(chromedp.JSPath(fmt.Sprintf(
		`[...document.querySelectorAll(%q)].flatMap(e => [...e.querySelectorAll('button')]).filter(b => (b.getAttribute('aria-label') || b.textContent).trim() === %q)`,
		scope, name)), chromedp.NodeVisible))
}

func (p *page) typeInto(sel, text string) {
	p.t.Helper()
	p.do("type into "+sel, chromedp.SetValue(chromedp.CSS(sel), text, chromedp.NodeVisible))
}

// screenshot saves the tab as screenshots/<name>.png.
func (p *page) screenshot(name string) {
	if p.ctx.Err() != nil {
		return
	}
	img, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Logf("screenshot: %v", err)
		return
	}
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		p.t.Logf("screenshot: %v", err)
		return
	}
	file := filepath.Join(screenshotDir, strings.NewReplacer("/", "_", " ", "_").Replace(name)+".png")
	if err := os.WriteFile(file, img, 0o644); err != nil {
		p.t.Logf("screenshot: %v", err)
		return
	}
	p.t.Logf("screenshot: test/browser/%s", file)
}

// threadRow is a thread row of the Run view as the automation contract
// exposes it.
type threadRow struct {
	ID         string `json:"id"`
	Path       string `json:"path"`
	Status     string `json:"status"`
	Worker     string `json:"worker"`
	Placements int    `json:"placements"`
}

func (p *page) threadRows() []threadRow {
	p.t.Helper()
	return eval[[]threadRow](p, `[...document.querySelectorAll('[data-thread-id]')].map(e => ({id: e.dataset.threadId,
		path: e.dataset.threadPath, status: e.dataset.status, worker: e.dataset.worker || '', placements: Number(e.dataset.placements || 0)}))`)
}
