package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
)

// tickEvery is how often a terminal tree is drawn again: elapsed times of
// running threads move between events.
const tickEvery = 200 * time.Millisecond

// treeView shows a run's threads on stderr. On a terminal it redraws the tree
// in place (rows cut to the terminal's width, the frame to its height), then
// replaces the live frame with the whole tree and a totals line; elsewhere
// (logs, CI, --no-tty) it prints one line as each thread starts, waits and
// ends, indented by depth, and the totals line at the end.
//
// Token numbers follow one convention everywhere: a thread's row shows its
// own model calls, the totals line the whole run's.
type treeView struct {
	w     io.Writer
	tty   bool
	color bool
	fd    int // of w, for its size; -1 if unknown
	rec   *record.Recorder

	mu     sync.Mutex // guards the writer: redraws, notices and approval prompts
	drawn  int        // lines of the last redraw, to move back over
	stopCh chan struct{}
	done   chan struct{}
	t0     time.Time
}

// newTreeView draws on w, as a live terminal tree when tty, the run its
// recorder keeps.
func newTreeView(w io.Writer, tty bool) *treeView {
	fd := -1
	if f, ok := w.(*os.File); ok {
		fd = int(f.Fd())
	}
	return &treeView{w: w, tty: tty, color: tty && os.Getenv("NO_COLOR") == "", fd: fd,
		rec:    record.NewRecorder(nil), // the ticker redraws
		stopCh: make(chan struct{}), done: make(chan struct{}), t0: time.Now()}
}

// send takes a run's followed event into the record and the view.
func (v *treeView) send(_ uint64, e event.Event) error {
	v.rec.Emit(e)
	v.Emit(e)
	return nil
}

// Emit prints live lines when not on a terminal.
func (v *treeView) Emit(e event.Event) {
	if v.tty {
		return
	}
	var line string
	indent := strings.Repeat("  ", e.Depth)
	name := printable(e.Name)
	switch e.Type {
	case event.ThreadStarted:
		line = fmt.Sprintf("%s▸ %s (depth %d) started", indent, name, e.Depth)
		if e.Worker != "" {
			line += " on " + printable(e.Worker)
		}
	case event.ThreadWaiting, event.ModelWaiting:
		// A model call waits for its endpoint's quota or to retry a
		// failed attempt; its going on prints nothing.
		if e.Type == event.ModelWaiting && e.Status != event.Waiting {
			return
		}
		line = fmt.Sprintf("%s· %s (depth %d) %s", indent, name, e.Depth, printable(e.Reason))
	case event.ThreadFinished:
		line = fmt.Sprintf("%s%s %s (depth %d) %s in %s, %s tokens (own)", indent, mark(e.Status), name, e.Depth, e.Status,
			fmtDur(time.Duration(e.Latency)), fmtTokens(e.Usage.InputTokens+e.Usage.OutputTokens))
		if e.Reason != "" {
			line += ": " + printable(oneLine(e.Reason, 200))
		}
	case event.ThreadRefused:
		line = fmt.Sprintf("%s✗ %s (depth %d) refused: %s limit", indent, name, e.Depth, printable(e.Reason))
	case event.ThreadHandoff:
		line = fmt.Sprintf("%s⇢ %s handoff %s", indent, name, printable(e.Reason))
	default:
		return
	}
	v.mu.Lock()
	fmt.Fprintln(v.w, line)
	v.mu.Unlock()
}

func (v *treeView) start() {
	if !v.tty {
		close(v.done)
		return
	}
	go func() {
		defer close(v.done)
		tick := time.NewTicker(tickEvery)
		defer tick.Stop()
		v.redraw()
		for {
			select {
			case <-v.stopCh:
				return
			case <-tick.C:
				v.redraw()
			}
		}
	}()
}

// finish stops the live view and shows the run as it ended: on a terminal
// the whole tree (every thread, not cut to the screen's height) in place of
// the live frame, then the totals line; elsewhere the totals line. final is
// the run's record; its threads and numbers win over what the events showed.
func (v *treeView) finish(final record.Run) {
	v.halt()
	run := v.merge(final)
	v.mu.Lock()
	defer v.mu.Unlock()
	now := time.Now()
	if v.tty {
		v.eraseLocked()
		width := v.width()
		for _, l := range treeLines(run, now) {
			fmt.Fprintln(v.w, v.paint(cut(l, width)))
		}
		if b := banner(run); b != "" {
			fmt.Fprintln(v.w, v.paint(cut(b, width)))
		}
		for _, l := range totals(run, now.Sub(v.t0), width) {
			fmt.Fprintln(v.w, cut(l, width))
		}
		return
	}
	if b := banner(run); b != "" {
		fmt.Fprintln(v.w, b)
	}
	fmt.Fprintln(v.w, totalsLine(run, now.Sub(v.t0)))
}

// stop ends the live view without a final frame (the run never started).
func (v *treeView) stop() {
	v.halt()
	v.mu.Lock()
	v.eraseLocked()
	v.mu.Unlock()
}

func (v *treeView) halt() {
	select {
	case <-v.stopCh:
	default:
		close(v.stopCh)
	}
	<-v.done
}

// merge is the final record with its threads in the order the live
// recorder knows (siblings in call order), any thread only one of them
// has kept.
func (v *treeView) merge(final record.Run) record.Run {
	live := v.rec.Snapshot()
	if len(final.Threads) == 0 {
		if final.RunID == "" {
			return live
		}
		final.Threads = live.Threads
		return final
	}
	byID := make(map[string]record.Thread, len(final.Threads))
	for _, t := range final.Threads {
		byID[t.ID] = t
	}
	ordered := make([]record.Thread, 0, len(final.Threads))
	for _, t := range live.Threads {
		if ft, ok := byID[t.ID]; ok {
			ordered = append(ordered, ft)
			delete(byID, t.ID)
		}
	}
	for _, t := range final.Threads {
		if _, left := byID[t.ID]; left {
			ordered = append(ordered, t)
		}
	}
	final.Threads = record.TreeOrder(ordered)
	return final
}

// notice prints one line above the live tree (or among the log lines).
func (v *treeView) notice(line string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.eraseLocked()
	if v.tty {
		line = cut(line, v.width())
	}
	fmt.Fprintln(v.w, line)
}

// redraw paints the live frame: as many rows as fit the terminal's height,
// each cut to its width, then the totals line.
func (v *treeView) redraw() {
	run := v.rec.Snapshot()
	now := time.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	width, height := v.size()
	lines := treeLines(run, now)
	sum := totals(run, now.Sub(v.t0), width)
	room := max(height-1-len(sum), 1) // and one spare line, so the frame never scrolls
	if len(lines) > room {
		hidden := len(lines) - (room - 1)
		lines = append(lines[:room-1:room-1], fmt.Sprintf("… %d more threads", hidden))
	}
	lines = append(lines, sum...)
	var b strings.Builder
	if v.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", v.drawn)
	}
	for _, l := range lines {
		b.WriteString("\r\x1b[2K")
		b.WriteString(v.paint(cut(l, width)))
		b.WriteByte('\n')
	}
	b.WriteString("\x1b[J") // whatever a longer last frame left below
	io.WriteString(v.w, b.String())
	v.drawn = len(lines)
}

// eraseLocked removes the live frame so a prompt, a notice or the final
// tree takes its place; the next redraw paints it again below.
func (v *treeView) eraseLocked() {
	if v.tty && v.drawn > 0 {
		fmt.Fprintf(v.w, "\x1b[%dA\r\x1b[J", v.drawn)
		v.drawn = 0
	}
}

// size is the terminal's width and height, or 80×24 when unknown.
func (v *treeView) size() (int, int) {
	if v.fd >= 0 {
		if w, h, err := term.GetSize(v.fd); err == nil && w > 0 && h > 0 {
			return w, h
		}
	}
	return 80, 24
}

func (v *treeView) width() int { w, _ := v.size(); return w }

// paint colours a row's status mark, unless NO_COLOR or not a terminal.
func (v *treeView) paint(l string) string {
	if !v.color {
		return l
	}
	for m, c := range map[string]string{"✓": "32", "✗": "31", "⊘": "33"} {
		if i := strings.Index(l, m); i >= 0 && strings.TrimLeft(l[:i], " ") == "" {
			return l[:i] + "\x1b[" + c + "m" + m + "\x1b[0m" + l[i+len(m):]
		}
	}
	return l
}

// cut shortens l to fit width columns (one column kept free, so a full row
// never wraps): rows are truncated, never wrapped.
func cut(l string, width int) string {
	limit := max(width-1, 1)
	if utf8.RuneCountInString(l) <= limit {
		return l
	}
	return string([]rune(l)[:limit-1]) + "…"
}

// treeLines renders one line per thread: name, depth, status, time, and the
// thread's own tokens. A waiting thread's status is what it waits for: a
// worker slot, its model endpoint's quota, or a retry of its model call
// ("retrying: 429, 2s").
func treeLines(run record.Run, now time.Time) []string {
	lines := make([]string, 0, len(run.Threads))
	for _, t := range run.Threads {
		elapsed := time.Duration(0)
		switch {
		case !t.FinishedAt.IsZero() && !t.StartedAt.IsZero():
			elapsed = t.FinishedAt.Sub(t.StartedAt)
		case !t.StartedAt.IsZero():
			elapsed = now.Sub(t.StartedAt)
		}
		status := string(t.Status)
		if t.Status == event.Waiting && t.Waiting != "" {
			status = t.Waiting
		}
		line := fmt.Sprintf("%s%s %s  depth %d  %s  %s  %s tok", strings.Repeat("  ", t.Depth), mark(t.Status), printable(t.Name),
			t.Depth, printable(status), fmtDur(elapsed), fmtTokens(t.Usage.InputTokens+t.Usage.OutputTokens))
		if t.Worker != "" {
			line += "  @" + printable(t.Worker)
		}
		lines = append(lines, line)
	}
	return lines
}

// banner is the row under the tree of a run that failed or was
// cancelled, saying why: the run may fail with every thread's row green (a
// budget ran out, the deadline passed), and the tree must not say it went
// well.
func banner(run record.Run) string {
	if run.Status != event.Failed && run.Status != event.Cancelled {
		return ""
	}
	why := string(run.Status)
	if run.Error != "" {
		why += ": " + printable(oneLine(run.Error, 200))
	}
	return mark(run.Status) + " run " + why
}

// totals is the totals line wrapped to the terminal's width at its
// separators (cut, it would lose the numbers): between its parts first,
// within a part that is wider than the terminal at its commas.
func totals(run record.Run, elapsed time.Duration, width int) []string {
	type piece struct{ text, sep string }
	var pieces []piece
	parts := strings.Split(totalsLine(run, elapsed), " · ")
	for i, part := range parts {
		sep := " · "
		if i == len(parts)-1 {
			sep = ""
		}
		if utf8.RuneCountInString(part) < width {
			pieces = append(pieces, piece{part, sep})
			continue
		}
		items := strings.Split(part, ", ")
		for j, item := range items {
			if j < len(items)-1 {
				pieces = append(pieces, piece{item, ", "})
			} else {
				pieces = append(pieces, piece{item, sep})
			}
		}
	}
	var lines []string
	line, owed := "", ""
	for _, p := range pieces {
		if line != "" && utf8.RuneCountInString(line+owed+p.text) >= width {
			lines = append(lines, line+strings.TrimRight(strings.TrimSuffix(owed, " · "), " "))
			line, owed = "", ""
		}
		line += owed + p.text
		owed = p.sep
	}
	return append(lines, line)
}

// totalsLine sums up a run (record.Run.Sum): threads by state, spawns
// refused, the whole run's tokens, its time, and its calls in doubt.
func totalsLine(run record.Run, elapsed time.Duration) string {
	t := run.Sum()
	if !run.StartedAt.IsZero() && !run.FinishedAt.IsZero() {
		elapsed = run.FinishedAt.Sub(run.StartedAt)
	}
	s := fmt.Sprintf("threads: %d done, %d running, %d failed, %d cancelled, %d refused", t.Done, t.Running, t.Failed, t.Cancelled, t.Refused)
	if t.Waiting > 0 {
		s += fmt.Sprintf(", %d waiting", t.Waiting) // for a worker, a quota or a retry: each row says which
	}
	s += fmt.Sprintf(" · run total %s in, %s out tokens · %s", fmtTokens(t.InputTokens), fmtTokens(t.OutputTokens), fmtDur(elapsed))
	if t.Refused > 0 {
		s += " · refused: " + refusedBy(run.Refusals)
	}
	if t.CostUSD != nil {
		s += " · " + fmtCost(*t.CostUSD)
	}
	if t.InDoubt > 0 {
		s += fmt.Sprintf(" · %d tool calls in doubt (cut by a failure, not run again)", t.InDoubt)
	}
	return s
}

// fmtCost shows US dollars to a hundredth of a cent: $0.0123.
func fmtCost(usd float64) string { return fmt.Sprintf("$%.4f", usd) }

// refusedBy says which limits refused spawns, and how many each.
func refusedBy(r record.Refusals) string {
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{r.Depth, "at the depth limit"}, {r.Threads, "at the thread limit"}, {r.Budget, "by the budget"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	return strings.Join(parts, ", ")
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

// fmtTokens is the exact count, so the tree, get, watch, the record and
// the API show the same numbers.
func fmtTokens(n int64) string { return fmt.Sprint(n) }
