package webhook

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// job is a hand-written Job: it records how it was settled.
type job struct {
	data    []byte
	attempt int
	done    bool
	retry   time.Duration
	retried bool
}

func (j *job) Data() []byte               { return j.data }
func (j *job) Attempt() int               { return j.attempt }
func (j *job) Done(context.Context) error { j.done = true; return nil }
func (j *job) Retry(_ context.Context, d time.Duration) error {
	j.retried, j.retry = true, d
	return nil
}

func newJob(t *testing.T, url string, attempt int) *job {
	t.Helper()
	data, err := json.Marshal(Message{ID: "msg_r1_0_x", URL: url, RunID: "r1", Body: json.RawMessage(`{"type":"run.finished"}`)})
	if err != nil {
		t.Fatal(err)
	}
	return &job{data: data, attempt: attempt}
}

func TestDeliverSettles(t *testing.T) {
	secret, err := ParseSecret(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := standardwebhooks.NewWebhook(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("a redirect was followed")
	}))
	defer elsewhere.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := verifier.Verify(body, r.Header); err != nil {
			t.Errorf("signature: %v", err)
		}
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusNoContent)
		case "/gone":
			w.WriteHeader(http.StatusGone)
		case "/redirect":
			http.Redirect(w, r, elsewhere.URL, http.StatusFound)
		default:
			http.Error(w, "down", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	d, err := New(Config{Secret: secret, Attempts: 3, Backoff: time.Second, MaxBackoff: 3 * time.Second,
		Next: func(context.Context) (Job, error) { panic("not used") }})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		attempt    int
		code       int
		delivered  bool
		final      bool
		minRetry   time.Duration
		maxRetry   time.Duration
	}{
		{"2xx delivers", "/ok", 1, 204, true, true, 0, 0},
		{"5xx retries after the first backoff", "/down", 1, 503, false, false, 500 * time.Millisecond, time.Second},
		{"the second backoff doubles", "/down", 2, 503, false, false, time.Second, 2 * time.Second},
		{"the last attempt gives up", "/down", 3, 503, false, true, 0, 0},
		{"410 gives up at once", "/gone", 1, 410, false, true, 0, 0},
		{"a redirect is a failure, not followed", "/redirect", 1, 302, false, false, 500 * time.Millisecond, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := newJob(t, srv.URL+tc.path, tc.attempt)
			o := d.Deliver(context.Background(), j)
			if o.StatusCode != tc.code || o.Delivered() != tc.delivered || o.Final != tc.final || o.Attempt != tc.attempt {
				t.Fatalf("outcome %+v, want code %d delivered %v final %v", o, tc.code, tc.delivered, tc.final)
			}
			if j.done != tc.final || j.retried == tc.final {
				t.Fatalf("job done %v retried %v, want done %v", j.done, j.retried, tc.final)
			}
			if j.retried && (j.retry < tc.minRetry || j.retry > tc.maxRetry) {
				t.Errorf("retry after %s, want %s to %s", j.retry, tc.minRetry, tc.maxRetry)
			}
		})
	}
}

func TestDeliverConnectionRefusedRetries(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/x"
	srv.Close() // nothing listens there now
	secret, _ := ParseSecret(testSecret)
	d, err := New(Config{Secret: secret, Next: func(context.Context) (Job, error) { panic("not used") }})
	if err != nil {
		t.Fatal(err)
	}
	j := newJob(t, url, 1)
	o := d.Deliver(context.Background(), j)
	if o.Err == nil || o.StatusCode != 0 || o.Final || !j.retried {
		t.Fatalf("outcome %+v, job %+v: want a failure without a status, retried", o, j)
	}
}

// Delivered reports whether the call delivered the message.
func (o Outcome) Delivered() bool { return o.Err == nil }
