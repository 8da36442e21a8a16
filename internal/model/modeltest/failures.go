package modeltest

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/model"
)

// The cases below cover failure: status classification, retries, broken
// bodies, cancellation, and concurrent use.

// wantErr makes a call with o and checks that its error wraps want, names
// no key, and that n requests were made; it returns the error.
func wantErr(t *testing.T, s *server, o Options, want error, n int) error {
	t.Helper()
	_, err := generate(t, s.model(o), hello)
	if !errors.Is(err, want) {
		t.Errorf("error = %v, want one wrapping %v", err, want)
	}
	if err != nil && strings.Contains(err.Error(), testKey) {
		t.Errorf("the error names the API key: %v", err)
	}
	wantRequests(t, s, n)
	return err
}

// wantOK checks that a call with o gets the answer "ok" in n requests.
func wantOK(t *testing.T, s *server, o Options, n int) {
	t.Helper()
	if resp := mustGenerate(t, s.model(o), hello); resp.Text != "ok" {
		t.Errorf("text = %q", resp.Text)
	}
	wantRequests(t, s, n)
}

func testUnauthorized(t *testing.T, h Harness) {
	// Servers echo the key back; it must not survive into the error.
	s := serve(t, h, Reply{Status: 401, ErrorMessage: "Incorrect API key provided: " + testKey + "."})
	err := wantErr(t, s, Options{}, model.ErrUnauthorized, 1)
	if model.Retryable(err) {
		t.Errorf("401 is retryable: %v", err)
	}
}

func testBadRequest(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Status: 400, ErrorMessage: "messages: field required"})
	err := wantErr(t, s, Options{}, model.ErrBadRequest, 1)
	if err != nil && !strings.Contains(err.Error(), "messages: field required") {
		t.Errorf("error %q lost the server's message", err)
	}
}

func testRateLimitedThenOK(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Status: 429, ErrorMessage: "slow down"}, Reply{Text: "ok"})
	wantOK(t, s, Options{}, 2)
}

// testRateLimitedNotCounted: 429s are not failures while the provider says
// retry; they do not spend MaxRetries.
func testRateLimitedNotCounted(t *testing.T, h Harness) {
	r := Reply{Status: 429, ErrorMessage: "slow down"}
	s := serve(t, h, r, r, r, r, Reply{Text: "ok"})
	wantOK(t, s, Options{MaxRetries: 1}, 5)
}

// testRetryAfterTooLong: a provider asking for more than MaxRetryAfter ends
// the call with its 429, for the caller to decide.
func testRetryAfterTooLong(t *testing.T, h Harness) {
	wait := strconv.Itoa(int((model.MaxRetryAfter + time.Second).Seconds()))
	s := serve(t, h, Reply{Status: 429, ErrorMessage: "daily quota", Header: http.Header{"Retry-After": {wait}}})
	wantErr(t, s, Options{}, model.ErrRateLimited, 1)
}

func testRetryAfter(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Status: 429, Header: http.Header{"Retry-After": {"1"}}}, Reply{Text: "ok"})
	start := time.Now()
	mustGenerate(t, s.model(Options{}), hello)
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Errorf("retried after %v; the server asked for 1s", waited)
	}
	wantRequests(t, s, 2)
}

func testServerErrorThenOK(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Status: 503, ErrorMessage: "overloaded"}, Reply{Text: "ok"})
	wantOK(t, s, Options{}, 2)
}

func testServerErrorExhausted(t *testing.T, h Harness) {
	r := Reply{Status: 500, ErrorMessage: "internal"}
	s := serve(t, h, r, r, r, r)
	wantErr(t, s, Options{MaxRetries: 3}, model.ErrServer, 4)
}

func testNoRetries(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Status: 500, ErrorMessage: "internal"})
	wantErr(t, s, Options{MaxRetries: -1}, model.ErrServer, 1)
}

func testHangUp(t *testing.T, h Harness) {
	s := serve(t, h, Reply{HangUp: true}, Reply{Text: "ok"})
	wantOK(t, s, Options{}, 2)
}

func testMalformedJSON(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Body: `{"id":"x","choices":[{"message":{"content":"trunc`})
	wantErr(t, s, Options{}, model.ErrBadResponse, 1)
}

func testNotJSON(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Body: "<html>gateway says hi</html>", Header: http.Header{"Content-Type": {"text/html"}}})
	wantErr(t, s, Options{}, model.ErrBadResponse, 1)
}

// promptly bounds how long a cancelled call may take to return.
const promptly = 3 * time.Second

func testCancel(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Text: "too late", Delay: time.Minute})
	m := s.model(Options{})
	stop := errors.New("user pressed stop")
	ctx, cancel := context.WithCancelCause(t.Context())
	time.AfterFunc(50*time.Millisecond, func() { cancel(stop) })
	start := time.Now()
	_, err := m.Generate(ctx, hello)
	if took := time.Since(start); took > promptly {
		t.Errorf("Generate returned %v after cancel", took)
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, stop) {
		t.Errorf("error = %v, want context.Canceled with its cause", err)
	}
	if model.Retryable(err) {
		t.Errorf("a cancelled call is retryable: %v", err)
	}
}

func testDeadline(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Text: "too late", Delay: time.Minute})
	m := s.model(Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := m.Generate(ctx, hello)
	if took := time.Since(start); took > promptly {
		t.Errorf("Generate returned %v after the deadline", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error = %v, want context.DeadlineExceeded", err)
	}
}

// testNoResponseRetried: a server that sends nothing, not even headers,
// for the idle timeout fails the attempt, which is retried.
func testNoResponseRetried(t *testing.T, h Harness) {
	s := serve(t, h, Reply{Text: "too late", Delay: time.Minute}, Reply{Text: "ok"})
	wantOK(t, s, Options{IdleTimeout: time.Second}, 2)
	if logs := s.logs.String(); !strings.Contains(logs, "stalled: no response for 1s") {
		t.Errorf("the retry was not logged with the stall:\n%s", logs)
	}
}

func testConcurrent(t *testing.T, h Harness) {
	const n = 8
	replies := make([]Reply, n)
	for i := range replies {
		replies[i] = Reply{Text: "ok", Usage: model.Usage{InputTokens: 1, OutputTokens: 1}}
	}
	s := serve(t, h, replies...)
	m := s.model(Options{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if resp, err := generate(t, m, hello); err != nil || resp.Text != "ok" {
				t.Errorf("Generate = %q, %v", resp.Text, err)
			}
		})
	}
	wg.Wait()
	wantRequests(t, s, n)
}
