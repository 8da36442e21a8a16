package quota

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/formica-run/formica/internal/model"
)

// simServer plays a provider's quota as a function of (fake) time: a
// request bucket of burst refilled continuously, a bound on the calls
// answered at once, and a fixed time to answer. It decides each request
// when it arrives and answers 429 at once, as internal/model/quotaserver
// does.
type simServer struct {
	rate        float64 // requests a second
	burst       float64
	maxInFlight int
	latency     time.Duration
	signals     string // "headers", "retry-after" or "bare"
	anthropic   bool   // Anthropic's header names instead of OpenAI's
	// jitter, when set, delays each request's arrival and answer by up to
	// that much at random: the network between the limiter and the server.
	jitter time.Duration
	rng    *rand.Rand

	mu                  sync.Mutex
	level               float64
	at                  time.Time
	inFlight            int
	requests, refusedN  int
	reservedInFlight    int
	first, lastAccepted time.Time
}

func newSimServer(rpm, burst, maxInFlight int, latency time.Duration, signals string) *simServer {
	return &simServer{rate: float64(rpm) / 60, burst: float64(burst), level: float64(burst),
		maxInFlight: maxInFlight, latency: latency, signals: signals, at: time.Now()}
}

func (s *simServer) delay() {
	if s.jitter <= 0 {
		return
	}
	s.mu.Lock()
	d := time.Duration(s.rng.Int64N(int64(s.jitter)))
	s.mu.Unlock()
	time.Sleep(d)
}

func (s *simServer) refill(now time.Time) {
	s.level = math.Min(s.burst, s.level+s.rate*now.Sub(s.at).Seconds())
	s.at = now
}

func (s *simServer) untilFull() time.Duration {
	return time.Duration(math.Ceil((s.burst - s.level) / s.rate * 1e9))
}

func (s *simServer) rateHeaders(h http.Header, now time.Time) {
	if s.signals != "headers" {
		return
	}
	limit := strconv.Itoa(int(math.Round(s.rate * 60)))
	remaining := strconv.Itoa(int(math.Floor(s.level + 1e-9)))
	if s.anthropic {
		h.Set("anthropic-ratelimit-requests-limit", limit)
		h.Set("anthropic-ratelimit-requests-remaining", remaining)
		h.Set("anthropic-ratelimit-requests-reset", now.Add(s.untilFull()).UTC().Format(time.RFC3339))
		return
	}
	h.Set("x-ratelimit-limit-requests", limit)
	h.Set("x-ratelimit-remaining-requests", remaining)
	h.Set("x-ratelimit-reset-requests", s.untilFull().String())
}

// send is one request reaching the server now. reserved says an oracle
// already took its token and place (see oracle).
func (s *simServer) send(reserved bool) model.Outcome {
	s.delay()
	s.mu.Lock()
	now := time.Now()
	s.refill(now)
	s.requests++
	if s.first.IsZero() {
		s.first = now
	}
	h := http.Header{}
	if !reserved && (s.maxInFlight > 0 && s.inFlight >= s.maxInFlight || s.level < 1) {
		s.refusedN++
		s.rateHeaders(h, now)
		if s.signals != "bare" {
			secs := math.Max(1, math.Ceil((1-s.level)/s.rate))
			h.Set("retry-after", strconv.Itoa(int(secs)))
		}
		s.mu.Unlock()
		// The refusal travels back, while calls granted with this one go.
		time.Sleep(time.Millisecond)
		s.delay()
		return model.Outcome{Status: http.StatusTooManyRequests, Header: h, At: time.Now()}
	}
	if reserved {
		s.reservedInFlight--
	} else {
		s.level--
	}
	s.inFlight++
	s.rateHeaders(h, now)
	s.mu.Unlock()

	time.Sleep(s.latency)
	s.delay()

	s.mu.Lock()
	s.inFlight--
	s.lastAccepted = time.Now()
	s.mu.Unlock()
	return model.Outcome{Status: http.StatusOK, Header: h, At: time.Now()}
}

// oracle is a gate that reads the server's own bucket: it grants each call
// at the first moment the server accepts it, which makes the ideal
// makespan of a workload.
type oracle struct{ s *simServer }

type oracleTicket struct{}

func (oracleTicket) Done(model.Outcome) {}

func (o oracle) Take(ctx context.Context, _ model.Ask) (model.Ticket, error) {
	s := o.s
	for {
		s.mu.Lock()
		now := time.Now()
		s.refill(now)
		wait := time.Millisecond
		if s.maxInFlight == 0 || s.inFlight+s.reservedInFlight < s.maxInFlight {
			if s.level >= 1-1e-9 {
				s.level--
				s.reservedInFlight++
				s.mu.Unlock()
				return oracleTicket{}, nil
			}
			wait = time.Duration(math.Ceil((1 - s.level) / s.rate * 1e9))
		}
		s.mu.Unlock()
		time.Sleep(wait)
	}
}

// fanout is one process of an agent run: a root call, fan helper calls at
// once, then the root's last call. Each call retries its 429s at once, as
// model.Retry does behind a gate.
func fanout(g model.Gate, s *simServer, run string, fan int) {
	_, isOracle := g.(oracle)
	ctx := context.Background()
	call := func(thread string) {
		for {
			t, err := g.Take(ctx, model.Ask{Run: run, Thread: thread, InputTokens: 100, OutputTokens: 100})
			if err != nil {
				panic(err)
			}
			o := s.send(isOracle)
			t.Done(o)
			if !o.Refused() {
				return
			}
		}
	}
	call("root")
	var wg sync.WaitGroup
	for i := range fan {
		wg.Go(func() { call(fmt.Sprintf("helper-%d", i)) })
	}
	wg.Wait()
	call("root")
}

type simResult struct {
	requests, refused int
	makespan          time.Duration
}

func (r simResult) refusedShare() float64 { return float64(r.refused) / float64(r.requests) }

// runSim runs processes fan-outs of fan helpers (one run each) through
// the gate gate(server) makes, on a fresh server, and returns what the
// server saw.
func runSim(t *testing.T, server func() *simServer, gate func(*simServer) model.Gate, processes, fan int) simResult {
	var r simResult
	synctest.Test(t, func(t *testing.T) {
		s := server()
		g := gate(s)
		start := time.Now()
		var wg sync.WaitGroup
		for p := range processes {
			wg.Go(func() { fanout(g, s, fmt.Sprintf("run-%d", p), fan) })
		}
		wg.Wait()
		r = simResult{requests: s.requests, refused: s.refusedN, makespan: time.Since(start)}
	})
	return r
}

// simCase is one server and workload of the targets, and what the
// limiter must achieve there.
type simCase struct {
	name           string
	server         func() *simServer
	declared       Limits
	processes, fan int
	maxRefused     float64 // share of requests
	maxRatio       float64 // makespan / ideal
}

// The provider of the targets: 600 requests a minute in a bucket of 10,
// 16 calls at once, 300 ms an answer.
func provider(signals string, anthropic bool) func() *simServer {
	return func() *simServer {
		s := newSimServer(600, 10, 16, 300*time.Millisecond, signals)
		s.anthropic = anthropic
		return s
	}
}

// jittery is provider with up to 30 ms of network delay each way.
func jittery(signals string) func() *simServer {
	return func() *simServer {
		s := provider(signals, false)()
		s.jitter = 30 * time.Millisecond
		s.rng = rand.New(rand.NewPCG(1, 2))
		return s
	}
}

func TestSimulatedProviders(t *testing.T) {
	cases := []simCase{
		// (a): headers on every answer, nothing declared, 1+200+1 calls.
		{name: "headers/openai", server: provider("headers", false), processes: 1, fan: 200, maxRefused: 0.05, maxRatio: 1.25},
		{name: "headers/anthropic", server: provider("headers", true), processes: 1, fan: 200, maxRefused: 0.05, maxRatio: 1.25},
		// (b): only Retry-After on 429s, two processes of 1+59+1 calls.
		{name: "retry-after", server: provider("retry-after", false), processes: 2, fan: 59, maxRefused: 0.20, maxRatio: 1.5},
		// Declared limits equal to the server's: no refusal, near ideal.
		{name: "declared", server: provider("bare", false), declared: Limits{RequestsPerMinute: 600, Burst: 10},
			processes: 1, fan: 200, maxRefused: 0, maxRatio: 1.10},
		{name: "declared/headers", server: provider("headers", false), declared: Limits{RequestsPerMinute: 600, Burst: 10},
			processes: 1, fan: 200, maxRefused: 0, maxRatio: 1.10},
		// Beyond the targets: bare 429s, and a wide retry-after fan-out.
		{name: "bare", server: provider("bare", false), processes: 2, fan: 59, maxRefused: 0.25, maxRatio: 1.6},
		{name: "retry-after/wide", server: provider("retry-after", false), processes: 1, fan: 200, maxRefused: 0.20, maxRatio: 1.5},
		// The network between limiter and server delays calls unevenly.
		{name: "jitter/headers", server: jittery("headers"), processes: 1, fan: 200, maxRefused: 0.05, maxRatio: 1.25},
		{name: "jitter/retry-after", server: jittery("retry-after"), processes: 2, fan: 59, maxRefused: 0.20, maxRatio: 1.5},
		{name: "jitter/declared", server: jittery("bare"), declared: Limits{RequestsPerMinute: 600, Burst: 10},
			processes: 1, fan: 200, maxRefused: 0, maxRatio: 1.10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ideal := runSim(t, c.server, func(s *simServer) model.Gate { return oracle{s} }, c.processes, c.fan)
			if ideal.refused != 0 {
				t.Fatalf("oracle refused %d", ideal.refused)
			}
			var l *Limiter
			got := runSim(t, c.server, func(s *simServer) model.Gate {
				l = New(Config{Name: c.name, Limits: c.declared})
				return l
			}, c.processes, c.fan)
			snap := l.Snapshot()
			ratio := got.makespan.Seconds() / ideal.makespan.Seconds()
			t.Logf("%s: %d requests, %d refused (%.1f%%), makespan %v, ideal %v, ratio %.3f; learned %+v",
				c.name, got.requests, got.refused, 100*got.refusedShare(), got.makespan.Round(time.Millisecond),
				ideal.makespan.Round(time.Millisecond), ratio, snap.Learned)
			if got.refusedShare() > c.maxRefused {
				t.Errorf("refused %.1f%% of requests, want at most %.0f%%", 100*got.refusedShare(), 100*c.maxRefused)
			}
			if ratio > c.maxRatio {
				t.Errorf("makespan %.3f× the ideal, want at most %.2f×", ratio, c.maxRatio)
			}
		})
	}
}
