package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
)

// maxTreeLines bounds a terminal redraw; wide fan-outs are summarised.
const maxTreeLines = 40

// treeView shows a run's threads on stderr. On a terminal it redraws the whole
// tree in place; elsewhere (logs, CI) it prints one line as each thread starts
// and ends, indented by depth.
type treeView struct {
	w   io.Writer
	tty bool
	rec *record.Recorder

	mu     sync.Mutex // guards the writer: redraws and approval prompts
	drawn  int        // lines of the last redraw, to move back over
	dirty  bool
	stopCh chan struct{}
	done   chan struct{}
	t0     time.Time
}

func newTreeView(w io.Writer, tty bool) *treeView {
	return &treeView{w: w, tty: tty, stopCh: make(chan struct{}), done: make(chan struct{}), t0: time.Now()}
}

// Emit prints live lines when not on a terminal.
func (v *treeView) Emit(e event.Event) {
	if v.tty {
		return
	}
	var line string
	indent := strings.Repeat("  ", e.Depth)
	switch e.Type {
	case event.ThreadStarted:
		line = fmt.Sprintf("%s▸ %s (depth %d) started", indent, e.Name, e.Depth)
		if e.Worker != "" {
			line += " on " + e.Worker
		}
	case event.ThreadFinished:
		line = fmt.Sprintf("%s%s %s (depth %d) %s in %s, %s tokens", indent, mark(e.Status), e.Name, e.Depth, e.Status,
			fmtDur(time.Duration(e.Latency)), fmtTokens(e.Usage.InputTokens+e.Usage.OutputTokens))
		if e.Reason != "" {
			line += ": " + e.Reason
		}
	case event.ThreadRefused:
		line = fmt.Sprintf("%s✗ %s (depth %d) refused: %s limit", indent, e.Name, e.Depth, e.Reason)
	case event.ThreadHandoff:
		line = fmt.Sprintf("%s⇢ %s handoff %s", indent, e.Name, e.Reason)
	default:
		return
	}
	v.mu.Lock()
	fmt.Fprintln(v.w, line)
	v.mu.Unlock()
}

func (v *treeView) changed() {
	v.mu.Lock()
	v.dirty = true
	v.mu.Unlock()
}

func (v *treeView) start() {
	if !v.tty {
		close(v.done)
		return
	}
	go func() {
		defer close(v.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-v.stopCh:
				v.redraw(true)
				return
			case <-tick.C:
				v.redraw(false)
			}
		}
	}()
}

func (v *treeView) stop() {
	select {
	case <-v.stopCh:
	default:
		close(v.stopCh)
	}
	<-v.done
}

func (v *treeView) redraw(force bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.dirty && !force {
		return
	}
	v.dirty = false
	lines := treeLines(v.rec.Snapshot(), time.Now())
	var b strings.Builder
	if v.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", v.drawn)
	}
	for _, l := range lines {
		b.WriteString("\x1b[2K")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	for i := len(lines); i < v.drawn; i++ {
		b.WriteString("\x1b[2K\n")
	}
	if extra := v.drawn - len(lines); extra > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", extra)
	}
	io.WriteString(v.w, b.String())
	v.drawn = len(lines)
}

// clear erases the drawn tree so a prompt can use the terminal; the next
// redraw paints it again below the prompt.
func (v *treeView) clearLocked() {
	if v.tty && v.drawn > 0 {
		fmt.Fprintf(v.w, "\x1b[%dA\x1b[J", v.drawn)
		v.drawn = 0
		v.dirty = true
	}
}

// treeLines renders one line per thread: name, depth, status, time, tokens.
func treeLines(run record.Run, now time.Time) []string {
	var lines []string
	for i, t := range run.Threads {
		if i == maxTreeLines-1 && len(run.Threads) > maxTreeLines {
			lines = append(lines, fmt.Sprintf("… %d more threads", len(run.Threads)-i))
			break
		}
		elapsed := time.Duration(0)
		switch {
		case !t.FinishedAt.IsZero():
			elapsed = t.FinishedAt.Sub(t.StartedAt)
		case !t.StartedAt.IsZero():
			elapsed = now.Sub(t.StartedAt)
		}
		line := fmt.Sprintf("%s%s %s  depth %d  %s  %s  %s tok", strings.Repeat("  ", t.Depth), mark(t.Status), t.Name,
			t.Depth, t.Status, fmtDur(elapsed), fmtTokens(t.Usage.InputTokens+t.Usage.OutputTokens))
		if t.Worker != "" {
			line += "  @" + t.Worker
		}
		lines = append(lines, line)
	}
	if r := run.Refusals; r.Depth+r.Threads > 0 {
		lines = append(lines, fmt.Sprintf("refused spawns: %d at the depth limit, %d at the thread limit", r.Depth, r.Threads))
	}
	return lines
}

func mark(s event.Status) string {
	switch s {
	case event.Succeeded:
		return "✓"
	case event.Failed:
		return "✗"
	case event.Cancelled:
		return "⊘"
	case event.Running:
		return "▸"
	}
	return "·"
}

func fmtDur(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

func fmtTokens(n int64) string {
	if n >= 10000 {
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	}
	return fmt.Sprint(n)
}
