package modeltest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/formica-run/formica/internal/model"
)

// The cases below cover streaming (pieces, pacing, stalls, cut streams,
// error events, plain JSON answers) and the gate.

// testPlainJSON: a server that answers a streamed request with one JSON
// object (Content-Type application/json) is still understood.
func testPlainJSON(t *testing.T, h Harness) {
	calls := []model.ToolCall{{ID: "call_J1", Name: "search", Arguments: `{"q":"sugar"}`}}
	s := serve(t, h, Reply{JSON: true, Text: "plain", ToolCalls: calls, Usage: model.Usage{InputTokens: 7, OutputTokens: 2}})
	resp := mustGenerate(t, s.model(Options{}), hello)
	want := model.Response{Text: "plain", ToolCalls: calls, Usage: model.Usage{InputTokens: 7, OutputTokens: 2}}
	if diff := cmp.Diff(want, resp, cmpIgnoreStop); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

// testLongStream: an answer whose bytes keep coming never hits the idle
// timeout, however much longer than it the whole answer takes.
func testLongStream(t *testing.T, h Harness) {
	var words []string
	for i := range 60 {
		words = append(words, fmt.Sprintf("w%02d", i))
	}
	text := strings.Join(words, " ")
	idle := time.Second
	s := serve(t, h, Reply{Text: text, Pace: 50 * time.Millisecond, Usage: model.Usage{InputTokens: 3, OutputTokens: 60}})
	start := time.Now()
	resp := mustGenerate(t, s.model(Options{IdleTimeout: idle, MaxRetries: -1}), hello)
	if resp.Text != text {
		t.Errorf("text = %q, want %q", resp.Text, text)
	}
	if took := time.Since(start); took < 2*idle {
		t.Errorf("the answer took %v, not the long stream the case needs", took)
	}
	wantRequests(t, s, 1)
}

// testStallRetried: a stream that goes silent mid-answer fails the attempt
// as a server error saying it stalled, and the call is retried.
func testStallRetried(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Text: "the first words and then nothing", Events: 2, Stall: true}, Reply{Text: "ok"})
	// The idle timeout is long enough that the second answer, sent at
	// once, never trips it on a loaded machine.
	wantOK(t, s, Options{IdleTimeout: time.Second}, 2)
	if logs := s.logs.String(); !strings.Contains(logs, "stream stalled: no bytes for 1s") {
		t.Errorf("the retry was not logged with the stall:\n%s", logs)
	}
}

// testStallError: the stall's error wraps ErrServer and says what happened.
func testStallError(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Text: "the first words and then nothing", Events: 2, Stall: true})
	err := wantErr(t, s, Options{IdleTimeout: 1500 * time.Millisecond, MaxRetries: -1}, model.ErrServer, 1)
	if err != nil && !strings.Contains(err.Error(), "model provider server error: stream stalled: no bytes for 1.5s") {
		t.Errorf("error %q does not say the stream stalled", err)
	}
}

// testStreamCut: a stream that ends cleanly before its final event is a
// cut connection, retried, never a partial answer.
func testStreamCut(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Text: "half an answer is not an answer", Events: 3}, Reply{Text: "ok"})
	wantOK(t, s, Options{}, 2)
}

// testStreamErrorEvent: an error event mid-stream (an overload) is a server
// error carrying the server's message, retried.
func testStreamErrorEvent(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Text: "going well until", Events: 3, StreamError: "Overloaded"})
	err := wantErr(t, s, Options{MaxRetries: -1}, model.ErrServer, 1)
	if err != nil && !strings.Contains(err.Error(), "Overloaded") {
		t.Errorf("error %q lost the server's message", err)
	}

	s = serve(t, h, Reply{Text: "going well until", Events: 3, StreamError: "Overloaded"}, Reply{Text: "ok"})
	wantOK(t, s, Options{}, 2)
}

// testMalformedEvent: an event whose data is not JSON is a bad response,
// not retried.
func testMalformedEvent(t *testing.T, h Harness) {
	body := "event: message_start\ndata: {\"type\":\"message_start\",\"choices\":[{\"delta\n\n"
	s := serve(t, h, Reply{Body: body, Header: http.Header{"Content-Type": {"text/event-stream"}}})
	wantErr(t, s, Options{}, model.ErrBadResponse, 1)
}

// cmpIgnoreStop compares responses whatever the stop reason's word, and
// the response's id and model (the provider's metadata).
var cmpIgnoreStop = cmpopts.IgnoreFields(model.Response{}, "StopReason", "ID", "Model")

// recordingGate records every ticket taken and what Done reported.
type recordingGate struct {
	t        *testing.T
	mu       sync.Mutex
	asks     []model.Ask
	outcomes []*model.Outcome
}

func (g *recordingGate) Take(ctx context.Context, ask model.Ask) (model.Ticket, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asks = append(g.asks, ask)
	g.outcomes = append(g.outcomes, nil)
	return &recordedTicket{g: g, i: len(g.asks) - 1}, nil
}

type recordedTicket struct {
	g *recordingGate
	i int
}

func (r *recordedTicket) Done(o model.Outcome) {
	r.g.mu.Lock()
	defer r.g.mu.Unlock()
	if r.g.outcomes[r.i] != nil {
		r.g.t.Errorf("ticket %d: Done called twice", r.i)
	}
	r.g.outcomes[r.i] = &o
}

// testGate: every attempt takes one ticket, asking for the caller's run and
// thread and the request's token estimate, and gives it back once with
// what the server answered: no answer (status 0), a 429 with its headers,
// a 500, and the success with its usage. A gated 429 is retried without
// the provider sleeping through its Retry-After: the gate waits instead.
func testGate(t *testing.T, h Harness) {
	g := &recordingGate{t: t}
	usage := model.Usage{InputTokens: 21, OutputTokens: 4}
	limited := http.Header{"Retry-After": {"20"}, "X-Ratelimit-Remaining-Requests": {"0"}}
	s := serve(t, h,
		Reply{HangUp: true},
		Reply{Status: 429, ErrorMessage: "slow down", Header: limited},
		Reply{Status: 500, ErrorMessage: "boom"},
		Reply{Text: "ok", Usage: usage})
	m := s.model(Options{Gate: g})
	ctx := model.WithCaller(t.Context(), model.Caller{Run: "run-1", Thread: "thread-7"})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req := model.Request{Model: "test-model", Messages: hello.Messages, Args: model.Args{"max_tokens": 77}}
	start := time.Now()
	resp, err := m.Generate(ctx, req)
	if err != nil || resp.Text != "ok" {
		t.Fatalf("Generate = %q, %v", resp.Text, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Generate took %v: the provider slept through the 429's Retry-After instead of leaving the wait to the gate", took)
	}
	wantRequests(t, s, 4)

	g.mu.Lock()
	defer g.mu.Unlock()
	in, _ := model.EstimateTokens(req)
	for i, a := range g.asks {
		if want := (model.Ask{Run: "run-1", Thread: "thread-7", InputTokens: in, OutputTokens: 77}); a != want {
			t.Errorf("ask %d = %+v, want %+v", i, a, want)
		}
	}
	if len(g.outcomes) != 4 {
		t.Fatalf("%d tickets taken, want one per attempt (4)", len(g.outcomes))
	}
	for i, want := range []int{0, 429, 500, 200} {
		o := g.outcomes[i]
		if o == nil {
			t.Errorf("ticket %d: Done never called", i)
			continue
		}
		if o.Status != want {
			t.Errorf("ticket %d: status %d, want %d", i, o.Status, want)
		}
		if want != 0 && o.At.IsZero() {
			t.Errorf("ticket %d: At is zero though headers arrived", i)
		}
		wantUsage := model.Usage{}
		if want == 200 {
			wantUsage = usage
		}
		if o.Usage != wantUsage {
			t.Errorf("ticket %d: usage %+v, want %+v", i, o.Usage, wantUsage)
		}
	}
	if o := g.outcomes[1]; o != nil && (o.Header.Get("Retry-After") != "20" || o.Header.Get("X-Ratelimit-Remaining-Requests") != "0" || !o.Refused()) {
		t.Errorf("the 429's outcome lost its headers: %+v", o)
	}
}

// blockedGate never has room: Take waits for ctx.
type blockedGate struct{}

func (blockedGate) Take(ctx context.Context, _ model.Ask) (model.Ticket, error) {
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

// testGateCancel: a call waiting for its gate ends with ctx, sending nothing.
func testGateCancel(t *testing.T, h Harness) {
	s := serve(t, h)
	stop := errors.New("user pressed stop")
	ctx, cancel := context.WithCancelCause(t.Context())
	time.AfterFunc(50*time.Millisecond, func() { cancel(stop) })
	_, err := s.model(Options{Gate: blockedGate{}}).Generate(ctx, hello)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, stop) || model.Retryable(err) {
		t.Errorf("error = %v, want context.Canceled with its cause", err)
	}
	wantRequests(t, s, 0)
}
