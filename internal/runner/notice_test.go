package runner

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/openai"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
)

// chatServer speaks OpenAI's Chat Completions wire format: its first
// request gets first (a failure), every later one the streamed answer
// "done". It counts the requests.
func chatServer(t *testing.T, first http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		if n.Add(1) == 1 {
			first(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		head := `"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741570283,"model":"m"`
		for _, data := range []string{
			`{` + head + `,"choices":[{"index":0,"delta":{"role":"assistant","content":"done"},"finish_reason":null}],"usage":null}`,
			`{` + head + `,"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
			`{` + head + `,"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13}}`,
			`[DONE]`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", data)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// failWith answers with status and an OpenAI error body, and header.
func failWith(status int, header http.Header) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for k, v := range header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"message":"try later","type":"requests","param":null,"code":null}}`)
	}
}

// A retried model call is an event the tree shows without any log level:
// model.waiting with status waiting and the reason ("retrying: 429, 50ms":
// the status, or what the connection met, and the wait), then status
// running once the retry goes out, before the call's model.call.
func TestModelRetryIsAWait(t *testing.T) {
	for _, tc := range []struct {
		name   string
		first  http.HandlerFunc
		reason string
	}{
		// The server asks for 50ms; that is the wait.
		{"429 with Retry-After", failWith(http.StatusTooManyRequests, http.Header{"Retry-After": {"0.05"}}), "retrying: 429, 50ms"},
		// The backoff's wait, 1ms here.
		{"503", failWith(http.StatusServiceUnavailable, nil), "retrying: 503, 1ms"},
		// No status: the connection closed without an answer.
		{"hang-up", func(w http.ResponseWriter, _ *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		}, "retrying: connection closed, 1ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, requests := chatServer(t, tc.first)
			m, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m",
				RetryDelay: time.Millisecond, MaxRetryDelay: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			events := &collector{}
			r, err := newInProcess(Config{
				Models: ModelOpenerFunc(func(ref string) (model.Model, error) {
					if ref != "openai:m" {
						return nil, fmt.Errorf("%w: %s", model.ErrUnknownProvider, ref)
					}
					return m, nil
				}),
				Events: events, DefaultModel: "openai:m",
			})
			if err != nil {
				t.Fatal(err)
			}
			res := run(t, r, RunRequest{Task: "hi", Agent: spec.Agent{Name: "root"}, Limits: limitsFor(1)})
			if res.Status != event.Succeeded || res.Output != "done" {
				t.Fatalf("run: %s %q %s", res.Status, res.Output, res.Error)
			}
			if got := requests.Load(); got != 2 {
				t.Errorf("%d requests, want 2 (one retry)", got)
			}

			var got []string
			for _, e := range events.of(event.ModelWaiting) {
				if e.ThreadID != res.RootID || e.Model != "openai:m" || e.Endpoint != "" || e.Name != "root" {
					t.Errorf("model.waiting about %s (%s), model %q, endpoint %q", e.ThreadID, e.Name, e.Model, e.Endpoint)
				}
				got = append(got, string(e.Status)+" "+e.Reason)
			}
			want := []string{"waiting " + tc.reason, "running "}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("model.waiting events %q, want %q", got, want)
			}
			// The wait and its end come before the call's model.call.
			var order []string
			events.mu.Lock()
			defer events.mu.Unlock()
			for _, e := range events.events {
				if e.Type == event.ModelWaiting || e.Type == event.ModelCall {
					order = append(order, string(e.Type)+"/"+string(e.Status))
				}
			}
			if want := "model.waiting/waiting model.waiting/running model.call/"; strings.Join(order, " ") != want {
				t.Errorf("events %q, want %q", order, want)
			}
		})
	}
}

// A call that fails while a retry's wait is shown ends the wait: the row
// never keeps it past the call. A wait the call goes on from at once (a
// gated 429: the gate waits instead) ends at once.
func TestRetryWaitEndsWithItsCall(t *testing.T) {
	events := &collector{}
	r, err := newInProcess(Config{Models: models{}, Events: events})
	if err != nil {
		t.Fatal(err)
	}
	th := &thread.Thread{RunID: "run", ID: "t1", Name: "root"}
	ref, _ := model.ParseRef("openai:m")
	st := &threadState{r: r, th: th, ref: ref}
	n := &callNotice{st: st}
	limited := model.StatusError("openai", 429, "slow down")

	n.Retrying(t.Context(), limited, 1, 0)
	n.Retrying(t.Context(), limited, 2, time.Hour)
	n.ended()
	n.ended()
	var got []string
	for _, e := range events.of(event.ModelWaiting) {
		got = append(got, string(e.Status)+" "+e.Reason)
	}
	want := []string{"waiting retrying: 429", "running ", "waiting retrying: 429, 1h0m0s", "running "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("model.waiting events %q, want %q", got, want)
	}
}

func TestRetryReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		wait time.Duration
		want string
	}{
		{model.StatusError("openai", 429, ""), 2 * time.Second, "retrying: 429, 2s"},
		{model.StatusError("openai", 429, ""), 1960 * time.Millisecond, "retrying: 429, 2s"},
		{model.StatusError("anthropic", 529, "overloaded"), 1234 * time.Millisecond, "retrying: 529, 1.2s"},
		{model.StatusError("openai", 500, ""), 500 * time.Millisecond, "retrying: 500, 500ms"},
		{model.StatusError("openai", 502, ""), 300 * time.Microsecond, "retrying: 502, 1ms"},
		{model.StatusError("openai", 429, ""), 90*time.Second + 400*time.Millisecond, "retrying: 429, 1m30s"},
		{model.StatusError("openai", 429, ""), 0, "retrying: 429"},
		{fmt.Errorf("openai: %w: Post \"http://x/v1/chat/completions\": read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer", model.ErrServer), time.Second, "retrying: connection reset, 1s"},
		{fmt.Errorf("openai: %w: Post \"http://x\": dial tcp 127.0.0.1:2: connect: connection refused", model.ErrServer), time.Second, "retrying: connection refused, 1s"},
		{fmt.Errorf("openai: %w: Post \"http://x\": net/http: TLS handshake timeout", model.ErrServer), time.Second, "retrying: timeout, 1s"},
		{fmt.Errorf("openai: %w: stalled: no response for 30s", model.ErrServer), time.Second, "retrying: stalled, 1s"},
		{fmt.Errorf("openai: %w: %w", model.ErrServer, errors.New("stream ended before its final event")), time.Second, "retrying: stream cut, 1s"},
		{fmt.Errorf("openai: %w: overloaded", model.ErrServer), time.Second, "retrying: server error, 1s"},
		{fmt.Errorf("anthropic: %w: rate_limit_error", model.ErrRateLimited), time.Second, "retrying: rate limited, 1s"},
	} {
		if got := retryReason(tc.err, tc.wait); got != tc.want {
			t.Errorf("retryReason(%v, %v) = %q, want %q", tc.err, tc.wait, got, tc.want)
		}
	}
}
