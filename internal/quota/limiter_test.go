package quota

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/formica-run/formica/internal/model"
)

var ok200 = model.Outcome{Status: http.StatusOK}

// notice records what a limiter told the QuotaNotice of a call.
type notice struct {
	mu        sync.Mutex
	waiting   []string
	resumed   int
	resumeErr error
}

func (n *notice) Waiting(_ context.Context, endpoint, reason string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.waiting = append(n.waiting, endpoint+": "+reason)
}

func (n *notice) Resumed(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.resumed++
	return n.resumeErr
}

func mustTake(t *testing.T, l *Limiter, ctx context.Context, ask model.Ask) model.Ticket {
	t.Helper()
	tk, err := l.Take(ctx, ask)
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	return tk
}

func TestFairnessAcrossRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// One call a second, so that everything queues.
		l := New(Config{Name: "ep", Limits: Limits{RequestsPerMinute: 60, Burst: 1}})
		var mu sync.Mutex
		var order []string
		take := func(run, thread string) {
			tk := mustTake(t, l, context.Background(), model.Ask{Run: run, Thread: thread})
			mu.Lock()
			order = append(order, run)
			mu.Unlock()
			tk.Done(ok200)
		}
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Go(func() { take("big", fmt.Sprintf("t%d", i%20)) })
		}
		synctest.Wait()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		mu.Lock()
		arrived := len(order)
		mu.Unlock()
		for range 5 {
			wg.Go(func() { take("small", "main") })
		}
		wg.Wait()
		var small []int
		for i, r := range order {
			if r == "small" {
				small = append(small, i-arrived)
			}
		}
		t.Logf("the small run's 5 calls arrived after %d grants and were granted %v grants later", arrived, small)
		for i, pos := range small {
			if pos > 2*i+2 {
				t.Errorf("small run's call %d granted %d grants after arriving, want at most %d", i, pos, 2*i+2)
			}
		}
	})
}

func TestFairnessWithinRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Config{Limits: Limits{RequestsPerMinute: 60, Burst: 1}})
		mustTake(t, l, context.Background(), model.Ask{}).Done(ok200) // empties the bucket
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		take := func(thread string, i int) {
			wg.Go(func() {
				mustTake(t, l, context.Background(), model.Ask{Run: "r", Thread: thread}).Done(ok200)
				mu.Lock()
				order = append(order, fmt.Sprintf("%s%d", thread, i))
				mu.Unlock()
			})
			synctest.Wait() // queued in this order
		}
		take("x", 1)
		take("x", 2)
		take("x", 3)
		take("y", 1)
		wg.Wait()
		if got, want := strings.Join(order, " "), "x1 y1 x2 x3"; got != want {
			t.Errorf("grant order %q, want %q (threads in turn, calls of a thread in order)", got, want)
		}
	})
}

func TestWaitingNoticeAndHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var waits []time.Duration
		l := New(Config{Name: "ep", Limits: Limits{RequestsPerMinute: 60, Burst: 1},
			OnWait: func(d time.Duration) { waits = append(waits, d) }})
		n := &notice{}
		ctx := model.WithQuotaNotice(context.Background(), n)
		mustTake(t, l, ctx, model.Ask{}).Done(ok200)
		if len(n.waiting) != 0 || n.resumed != 0 {
			t.Fatalf("a call granted at once notified %v, %d", n.waiting, n.resumed)
		}
		start := time.Now()
		mustTake(t, l, ctx, model.Ask{}).Done(ok200)
		waited := time.Since(start)
		if waited < 990*time.Millisecond || waited > 1100*time.Millisecond {
			t.Errorf("second call waited %v, want about 1s at 60 a minute", waited)
		}
		if want := []string{"ep: requests per minute"}; fmt.Sprint(n.waiting) != fmt.Sprint(want) || n.resumed != 1 {
			t.Errorf("notice heard %q and %d resumes, want %q and 1", n.waiting, n.resumed, want)
		}
		if len(waits) != 1 || waits[0] != waited {
			t.Errorf("OnWait heard %v, want [%v]", waits, waited)
		}
		s := l.Snapshot()
		if s.Waits != 1 || s.WaitTime != waited || s.Grants != 2 {
			t.Errorf("snapshot %+v", s)
		}
	})
}

func TestResumedErrorGivesTicketBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Config{Limits: Limits{RequestsPerMinute: 60, Burst: 1}})
		mustTake(t, l, context.Background(), model.Ask{}).Done(ok200)
		boom := errors.New("slot gone")
		ctx := model.WithQuotaNotice(context.Background(), &notice{resumeErr: boom})
		if _, err := l.Take(ctx, model.Ask{}); !errors.Is(err, boom) {
			t.Fatalf("Take = %v, want %v", err, boom)
		}
		if s := l.Snapshot(); s.InFlight != 0 {
			t.Errorf("in flight %d after the ticket was given back", s.InFlight)
		}
		// The request was refunded: the next call goes at once.
		start := time.Now()
		mustTake(t, l, context.Background(), model.Ask{}).Done(ok200)
		if d := time.Since(start); d != 0 {
			t.Errorf("next call waited %v, want 0 (refunded)", d)
		}
	})
}

func TestCancelWhileQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Config{Name: "ep", Limits: Limits{InFlight: 1}})
		held := mustTake(t, l, context.Background(), model.Ask{})
		cause := errors.New("run stopped")
		ctx, cancel := context.WithCancelCause(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := l.Take(ctx, model.Ask{Run: "r"})
			errc <- err
		}()
		synctest.Wait()
		if s := l.Snapshot(); s.Queued != 1 || s.Waiting != "calls in flight" {
			t.Fatalf("snapshot %+v, want one call queued for calls in flight", s)
		}
		cancel(cause)
		err := <-errc
		if !errors.Is(err, cause) {
			t.Fatalf("Take = %v, want it to wrap %v", err, cause)
		}
		if s := l.Snapshot(); s.Queued != 0 || s.InFlight != 1 {
			t.Errorf("snapshot %+v, want nothing queued, one in flight", s)
		}
		held.Done(ok200)
		mustTake(t, l, context.Background(), model.Ask{}).Done(ok200)
		if _, err := l.Take(ctx, model.Ask{}); !errors.Is(err, cause) {
			t.Errorf("Take with an ended ctx = %v", err)
		}
	})
}

func TestInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Config{Name: "ep", Limits: Limits{InFlight: 2}})
		a := mustTake(t, l, context.Background(), model.Ask{})
		b := mustTake(t, l, context.Background(), model.Ask{})
		n := &notice{}
		got := make(chan model.Ticket)
		go func() { got <- mustTake(t, l, model.WithQuotaNotice(context.Background(), n), model.Ask{}) }()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("third call granted with two in flight")
		default:
		}
		a.Done(ok200)
		c := <-got
		if fmt.Sprint(n.waiting) != "[ep: calls in flight]" {
			t.Errorf("waiting reason %q", n.waiting)
		}
		b.Done(ok200)
		c.Done(ok200)
		if s := l.Snapshot(); s.InFlight != 0 {
			t.Errorf("in flight %d", s.InFlight)
		}
	})
}

func TestReleaseOwnerAndIdempotentDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Config{Limits: Limits{InFlight: 3}})
		ctx := context.Background()
		a, _ := l.TakeFor(ctx, "w1", model.Ask{})
		b, _ := l.TakeFor(ctx, "w1", model.Ask{})
		c, _ := l.TakeFor(ctx, "w2", model.Ask{})
		if a.Owner() != "w1" || a.ID() == b.ID() {
			t.Fatalf("tickets %d %d owner %q", a.ID(), b.ID(), a.Owner())
		}
		if n := l.ReleaseOwner("w1"); n != 2 {
			t.Fatalf("ReleaseOwner = %d, want 2", n)
		}
		a.Done(ok200) // released: ignored
		if s := l.Snapshot(); s.InFlight != 1 {
			t.Fatalf("in flight %d, want 1", s.InFlight)
		}
		c.Done(ok200)
		c.Done(ok200)
		c.Cancel()
		if s := l.Snapshot(); s.InFlight != 0 {
			t.Fatalf("in flight %d after repeated Done, want 0", s.InFlight)
		}
		if n := l.ReleaseOwner("w1"); n != 0 {
			t.Errorf("second ReleaseOwner = %d", n)
		}
	})
}

func TestTokensCorrectedByUsage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 6000 a minute: the bucket holds a little under 6000.
		l := New(Config{Name: "ep", Limits: Limits{TokensPerMinute: 6000}})
		big := mustTake(t, l, context.Background(), model.Ask{InputTokens: 3000, OutputTokens: 2990})
		n := &notice{}
		got := make(chan model.Ticket)
		go func() {
			got <- mustTake(t, l, model.WithQuotaNotice(context.Background(), n), model.Ask{InputTokens: 500, OutputTokens: 500})
		}()
		synctest.Wait()
		if fmt.Sprint(n.waiting) != "[ep: tokens per minute]" {
			t.Fatalf("waiting %q", n.waiting)
		}
		start := time.Now()
		big.Done(model.Outcome{Status: 200, Usage: model.Usage{InputTokens: 2000, OutputTokens: 100}})
		(<-got).Done(ok200)
		if d := time.Since(start); d != 0 {
			t.Errorf("refunded tokens took %v to reach the waiting call, want 0", d)
		}
	})
}

func TestRetryAfterPausesEveryone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Config{Name: "ep"})
		tk := mustTake(t, l, context.Background(), model.Ask{})
		h := http.Header{}
		h.Set("Retry-After", "2")
		start := time.Now()
		tk.Done(model.Outcome{Status: http.StatusTooManyRequests, Header: h})
		if s := l.Snapshot(); !s.PausedUntil.Equal(start.Add(2*time.Second)) || s.Refusals != 1 {
			t.Fatalf("snapshot %+v", s)
		}
		n := &notice{}
		mustTake(t, l, model.WithQuotaNotice(context.Background(), n), model.Ask{Run: "other"}).Done(ok200)
		if d := time.Since(start); d != 2*time.Second {
			t.Errorf("waited %v, want 2s", d)
		}
		if fmt.Sprint(n.waiting) != "[ep: provider asked to retry after 2s]" {
			t.Errorf("waiting %q", n.waiting)
		}
	})
}

func TestHeadersLowerDeclared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Config{Limits: Limits{RequestsPerMinute: 600}})
		h := http.Header{}
		h.Set("x-ratelimit-limit-requests", "60")
		h.Set("x-ratelimit-remaining-requests", "0")
		mustTake(t, l, context.Background(), model.Ask{}).Done(model.Outcome{Status: 200, Header: h})
		s := l.Snapshot()
		if s.Learned.RequestsPerMinute != 60 || s.Declared.RequestsPerMinute != 600 {
			t.Fatalf("learned %+v declared %+v", s.Learned, s.Declared)
		}
		// The provider's bucket is empty and refills at one a second.
		start := time.Now()
		for range 3 {
			mustTake(t, l, context.Background(), model.Ask{}).Done(ok200)
		}
		if d := time.Since(start); d < 3*time.Second || d > 3200*time.Millisecond {
			t.Errorf("3 calls took %v, want about 3s at the learned 60 a minute", d)
		}
		// A header above the declared limit does not raise it.
		h.Set("x-ratelimit-limit-requests", "6000")
		h.Set("x-ratelimit-remaining-requests", "5999")
		mustTake(t, l, context.Background(), model.Ask{}).Done(model.Outcome{Status: 200, Header: h})
		time.Sleep(time.Minute)
		start = time.Now()
		for range 1200 {
			mustTake(t, l, context.Background(), model.Ask{}).Done(ok200)
		}
		if d := time.Since(start); d < 60*time.Second {
			t.Errorf("1200 calls took %v, faster than the declared 600 a minute (burst 600) allow", d)
		}
	})
}

func TestParseSignals(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", "500")
	h.Set("x-ratelimit-remaining-requests", "499")
	h.Set("x-ratelimit-reset-requests", "120ms")
	h.Set("x-ratelimit-limit-tokens", "30000")
	h.Set("x-ratelimit-remaining-tokens", "29000.5")
	h.Set("retry-after-ms", "1500")
	h.Set("retry-after", "9")
	s := parseSignals(h, at)
	if s.requests != (limitSignal{500, 499, true, true}) || s.tokens != (limitSignal{30000, 29000, true, true}) ||
		s.retryAfter != 1500*time.Millisecond {
		t.Errorf("openai: %+v", s)
	}

	h = http.Header{}
	h.Set("anthropic-ratelimit-requests-limit", "50")
	h.Set("anthropic-ratelimit-requests-remaining", "10")
	h.Set("anthropic-ratelimit-requests-reset", at.Add(time.Second).Format(time.RFC3339))
	h.Set("anthropic-ratelimit-input-tokens-limit", "40000")
	h.Set("anthropic-ratelimit-input-tokens-remaining", "1000")
	h.Set("anthropic-ratelimit-output-tokens-limit", "8000")
	h.Set("anthropic-ratelimit-output-tokens-remaining", "0")
	h.Set("retry-after", "3")
	s = parseSignals(h, at)
	if s.requests != (limitSignal{50, 10, true, true}) || s.input != (limitSignal{40000, 1000, true, true}) ||
		s.output != (limitSignal{8000, 0, true, true}) || s.tokens.any() || s.retryAfter != 3*time.Second {
		t.Errorf("anthropic: %+v", s)
	}

	// An HTTP date counts from the answer's own Date, whatever our clock.
	h = http.Header{}
	h.Set("date", at.Add(-time.Hour).Format(http.TimeFormat))
	h.Set("retry-after", at.Add(-time.Hour+7*time.Second).Format(http.TimeFormat))
	if s := parseSignals(h, at); s.retryAfter != 7*time.Second || s.any() {
		t.Errorf("date: %+v", s)
	}
	h.Del("date")
	h.Set("retry-after", at.Add(4*time.Second).Format(http.TimeFormat))
	if s := parseSignals(h, at); s.retryAfter != 4*time.Second {
		t.Errorf("date without Date: %+v", s)
	}
	h.Set("retry-after", "soon")
	h.Set("x-ratelimit-limit-requests", "-3")
	if s := parseSignals(h, at); s.retryAfter != 0 || s.requests.hasLimit {
		t.Errorf("garbage: %+v", s)
	}
}

func TestLimits(t *testing.T) {
	if err := (Limits{RequestsPerMinute: 60, Burst: 5, InFlight: 2}).Validate(); err != nil {
		t.Error(err)
	}
	for _, bad := range []Limits{{TokensPerMinute: -1}, {InFlight: -1}, {Burst: 3}} {
		if err := bad.Validate(); !errors.Is(err, ErrLimits) {
			t.Errorf("%+v: Validate = %v", bad, err)
		}
	}
	a := Limits{RequestsPerMinute: 600, Burst: 10, TokensPerMinute: 1000}
	b := Limits{RequestsPerMinute: 300, InFlight: 4, TokensPerMinute: 2000}
	if got, want := a.Lower(b), (Limits{RequestsPerMinute: 300, Burst: 10, TokensPerMinute: 1000, InFlight: 4}); got != want {
		t.Errorf("Lower = %+v, want %+v", got, want)
	}
}

func TestRegistry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRegistry()
		var heard []string
		r.SetOnWait(func(key string, d time.Duration) { heard = append(heard, fmt.Sprintf("%s %v", key, d)) })
		a := r.Limiter("b-ep", Limits{RequestsPerMinute: 600, InFlight: 8})
		if r.Limiter("b-ep", Limits{}) != a {
			t.Fatal("a second Limiter call made a new limiter")
		}
		r.Limiter("b-ep", Limits{RequestsPerMinute: 60, Burst: 1, InFlight: 10})
		if got, want := a.Snapshot().Declared, (Limits{RequestsPerMinute: 60, Burst: 1, InFlight: 8}); got != want {
			t.Errorf("declared %+v, want %+v", got, want)
		}
		c := r.Limiter("a-ep", Limits{})
		ctx := context.Background()
		if _, err := a.TakeFor(ctx, "w", model.Ask{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.TakeFor(ctx, "w", model.Ask{}); err != nil {
			t.Fatal(err)
		}
		if n := r.ReleaseOwner("w"); n != 2 {
			t.Errorf("ReleaseOwner = %d, want 2", n)
		}
		mustTake(t, a, ctx, model.Ask{}).Done(ok200)
		snaps := r.Snapshots()
		if len(snaps) != 2 || snaps[0].Name != "a-ep" || snaps[1].Name != "b-ep" || snaps[1].InFlight != 0 {
			t.Errorf("snapshots %+v", snaps)
		}
		if len(heard) != 1 || !strings.HasPrefix(heard[0], "b-ep 1.0") {
			t.Errorf("OnWait heard %q", heard)
		}
	})
}

func TestConcurrentUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Config{Limits: Limits{RequestsPerMinute: 6000, Burst: 20, InFlight: 5, TokensPerMinute: 600000}})
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%7)*100*time.Millisecond+50*time.Millisecond)
				defer cancel()
				for j := range 20 {
					tk, err := l.Take(ctx, model.Ask{Run: fmt.Sprint(i % 3), Thread: fmt.Sprint(i), InputTokens: 100, OutputTokens: 50})
					if err != nil {
						return
					}
					time.Sleep(10 * time.Millisecond)
					if j%5 == 0 {
						tk.Done(model.Outcome{Status: http.StatusTooManyRequests})
					} else {
						tk.Done(model.Outcome{Status: 200, Usage: model.Usage{InputTokens: 90, OutputTokens: 70}})
					}
					go l.Snapshot()
				}
			})
		}
		wg.Wait()
		if s := l.Snapshot(); s.InFlight != 0 || s.Queued != 0 {
			t.Errorf("snapshot %+v after everyone left", s)
		}
	})
}

// ID identifies the ticket among its limiter's: its grant's sequence number.
func (t *Ticket) ID() uint64 { return t.seq }

// Owner is the owner TakeFor was given.
func (t *Ticket) Owner() string { return t.owner }
