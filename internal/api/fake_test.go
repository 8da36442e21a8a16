package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/record"
	"github.com/formica-run/formica/internal/wire"
)

// fakeBackend is an in-memory Backend. Events are numbered 1, 2, ... per run.
type fakeBackend struct {
	mu        sync.Mutex
	runs      map[string]record.Run
	order     []string // run ids, oldest first
	events    map[string][]event.Event
	changed   chan struct{} // closed and replaced on every change
	approvals map[string]Approval
	decided   map[string]bool
	workers   []wire.WorkerInfo
	assets    wire.Assets
	readyErr  error
	fail      error // when set, every call but Ready returns it
	panics    bool  // Workers panics

	submitted []SubmitRequest
	listArgs  []listArgs
	streams   int // Events calls in progress
	afters    []uint64

	threads     map[string][]ThreadSummary
	transcripts map[string]Transcript // by run/thread
}

type listArgs struct {
	Status string
	Limit  int
}

func newFake() *fakeBackend {
	return &fakeBackend{runs: map[string]record.Run{}, events: map[string][]event.Event{},
		changed: make(chan struct{}), approvals: map[string]Approval{}, decided: map[string]bool{}}
}

func (f *fakeBackend) broadcastLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// addRun stores a run with a status and events.
func (f *fakeBackend) addRun(id string, status event.Status, events ...event.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.runs[id]; !ok {
		f.order = append(f.order, id)
	}
	f.runs[id] = record.Run{RunID: id, Status: status, Task: "task of " + id}
	f.events[id] = append(f.events[id], events...)
	f.broadcastLocked()
}

func (f *fakeBackend) emit(id string, events ...event.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events[id] = append(f.events[id], events...)
	f.broadcastLocked()
}

func (f *fakeBackend) finish(id string, status event.Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.runs[id]
	r.Status = status
	f.runs[id] = r
	f.broadcastLocked()
}

func (f *fakeBackend) activeStreams() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.streams
}

func (f *fakeBackend) Submit(ctx context.Context, req SubmitRequest) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return "", f.fail
	}
	f.submitted = append(f.submitted, req)
	id := req.ID
	if id == "" {
		id = fmt.Sprintf("run-%d", len(f.order)+1)
	}
	r, ok := f.runs[id]
	switch {
	case !ok:
		f.order = append(f.order, id)
		f.runs[id] = record.Run{RunID: id, Status: record.Queued, Task: req.Task}
	case r.Task != req.Task:
		return "", fmt.Errorf("run id %s is taken by another run: %w", id, ErrConflict)
	}
	return id, nil
}

func (f *fakeBackend) ListRuns(ctx context.Context, status string, limit int, page string) ([]record.Run, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, "", f.fail
	}
	f.listArgs = append(f.listArgs, listArgs{status, limit})
	start := len(f.order) - 1
	if page != "" {
		n, err := strconv.Atoi(page)
		if err != nil || n < 0 || n > len(f.order) {
			return nil, "", fmt.Errorf("%w: bad page", ErrInvalid)
		}
		start = n - 1
	}
	var out []record.Run
	i := start
	for ; i >= 0 && len(out) < limit; i-- {
		if r := f.runs[f.order[i]]; status == "" || string(r.Status) == status {
			out = append(out, r)
		}
	}
	next := ""
	if i >= 0 {
		next = strconv.Itoa(i + 1)
	}
	return out, next, nil
}

func (f *fakeBackend) GetRun(ctx context.Context, id string) (record.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return record.Run{}, f.fail
	}
	r, ok := f.runs[id]
	if !ok {
		return record.Run{}, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	return r, nil
}

func (f *fakeBackend) Events(ctx context.Context, id string, after uint64, send func(uint64, event.Event) error) error {
	f.mu.Lock()
	f.streams++
	f.afters = append(f.afters, after)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.streams--
		f.mu.Unlock()
	}()
	for {
		f.mu.Lock()
		if f.fail != nil {
			f.mu.Unlock()
			return f.fail
		}
		r, ok := f.runs[id]
		evs, changed := f.events[id], f.changed
		f.mu.Unlock()
		if !ok {
			return fmt.Errorf("run %s: %w", id, ErrNotFound)
		}
		for ; after < uint64(len(evs)); after++ {
			if err := send(after+1, evs[after]); err != nil {
				return err
			}
		}
		if r.Status.Final() {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *fakeBackend) CancelThread(ctx context.Context, id, thread string) error {
	if err := f.CancelRun(ctx, id); err != nil {
		return err
	}
	if thread == "unknown" {
		return fmt.Errorf("thread %s: %w", thread, ErrNotFound)
	}
	return nil
}

func (f *fakeBackend) CancelRun(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	r, ok := f.runs[id]
	switch {
	case !ok:
		return fmt.Errorf("run %s: %w", id, ErrNotFound)
	case r.Status.Final():
		return fmt.Errorf("run %s already %s: %w", id, r.Status, ErrConflict)
	}
	return nil
}

func (f *fakeBackend) ResumeRun(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	r, ok := f.runs[id]
	switch {
	case !ok:
		return fmt.Errorf("run %s: %w", id, ErrNotFound)
	case r.Status != event.Failed && r.Status != event.Cancelled:
		return fmt.Errorf("run %s is %s: %w", id, r.Status, ErrConflict)
	}
	r.Status = record.Queued
	f.runs[id] = r
	return nil
}

func (f *fakeBackend) Threads(ctx context.Context, id string) ([]ThreadSummary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	if _, ok := f.runs[id]; !ok {
		return nil, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	return f.threads[id], nil
}

func (f *fakeBackend) Transcript(ctx context.Context, id, thread string) (Transcript, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return Transcript{}, f.fail
	}
	t, ok := f.transcripts[id+"/"+thread]
	if !ok {
		return Transcript{}, fmt.Errorf("thread %s of run %s: %w", thread, id, ErrNotFound)
	}
	return t, nil
}

func (f *fakeBackend) ListApprovals(ctx context.Context) ([]Approval, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	var out []Approval
	for id, a := range f.approvals {
		if !f.decided[id] {
			out = append(out, a)
		}
	}
	return out, nil
}

func (f *fakeBackend) Decide(ctx context.Context, id string, allow bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	if _, ok := f.approvals[id]; !ok {
		return fmt.Errorf("approval %s: %w", id, ErrNotFound)
	}
	if f.decided[id] {
		return fmt.Errorf("approval %s already decided: %w", id, ErrConflict)
	}
	f.decided[id] = true
	return nil
}

func (f *fakeBackend) Workers(ctx context.Context) ([]wire.WorkerInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.panics {
		panic("workers exploded")
	}
	if f.fail != nil {
		return nil, f.fail
	}
	return f.workers, nil
}

func (f *fakeBackend) Assets(ctx context.Context) (wire.Assets, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return wire.Assets{}, f.fail
	}
	return f.assets, nil
}

func (f *fakeBackend) Ready(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.readyErr
}

// testToken is the token of servers made with authed.
const testToken = "s3cret-token"

// harness is a server under test behind httptest.
type harness struct {
	t    *testing.T
	s    *Server
	fake *fakeBackend
	url  string
	// token is sent as a bearer token when set.
	token string
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	fake := newFake()
	s, err := New(cfg, fake)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.Shutdown(context.Background())
		ts.Close()
	})
	return &harness{t: t, s: s, fake: fake, url: ts.URL, token: cfg.Token}
}

// reply is a finished HTTP exchange.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request; body is JSON-encoded unless it is a string or a reader.
func (h *harness) do(method, path string, body any, header ...string) reply {
	h.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case io.Reader: // no Content-Length unless a strings, bytes Reader or Buffer
		r = b
	default:
		data, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, h.url+path, r)
	if err != nil {
		h.t.Fatal(err)
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

// decode unmarshals the body into a new T.
func decode[T any](t *testing.T, r reply) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return v
}

// errorOf returns the status and error code of an error response, and its
// message.
func errorOf(t *testing.T, r reply) (int, string, string) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json (body %q)", ct, r.body)
	}
	e := decode[ErrorBody](t, r)
	return r.status, e.Error.Code, e.Error.Message
}

// waitFor polls cond for up to five seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
