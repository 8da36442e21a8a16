package client_test

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/formica-run/formica/client"
	"github.com/formica-run/formica/internal/apitest"
)

// cutStreams is a transport that cuts the first event stream it carries
// after its first event, as a restarting coordinator or a proxy would,
// and remembers the Last-Event-ID of every stream request.
type cutStreams struct {
	mu      sync.Mutex
	cut     bool
	resumes []string
}

func (c *cutStreams) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || !strings.HasSuffix(req.URL.Path, "/events") {
		return resp, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resumes = append(c.resumes, req.Header.Get("Last-Event-ID"))
	if !c.cut && resp.StatusCode == http.StatusOK {
		c.cut = true
		resp.Body = &cutAfterEvent{rc: resp.Body}
	}
	return resp, nil
}

// cutAfterEvent passes a stream on up to the end of its first event, then
// fails as a dropped connection does.
type cutAfterEvent struct {
	rc   io.ReadCloser
	seen []byte
	done bool
}

func (b *cutAfterEvent) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := b.rc.Read(p)
	if i := bytes.Index(append(b.seen, p[:n]...), []byte("\n\n")); i >= 0 {
		b.done = true
		return i + 2 - len(b.seen), nil
	}
	b.seen = append(b.seen, p[:n]...)
	return n, err
}

func (b *cutAfterEvent) Close() error { return b.rc.Close() }

// TestEventsResumeADroppedStream: a stream cut after its first event is
// opened again after it, and the watch sees every event once, in order.
func TestEventsResumeADroppedStream(t *testing.T) {
	t.Parallel()
	cl, c, ctx := start(t)
	model := apitest.Script(t, "responses:\n  - text: done\n")
	id, err := c.Submit(ctx, client.SubmitRequest{Task: "t", Model: model})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, id); err != nil {
		t.Fatal(err)
	}
	var want []uint64
	if err := c.Events(ctx, id, 0, func(seq uint64, _ client.Event) error {
		want = append(want, seq)
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	tr := &cutStreams{}
	cut, err := client.New(cl.URL, apitest.Token, client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	var last client.Event
	err = cut.Events(ctx, id, 0, func(seq uint64, e client.Event) error {
		got = append(got, seq)
		last = e
		return nil
	})
	if err != nil || len(got) != len(want) || last.Type != client.RunFinished {
		t.Fatalf("Events over a cut stream = %v: ids %v, want %v", err, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("ids %v, want %v", got, want)
		}
	}
	if len(tr.resumes) != 2 || tr.resumes[0] != "" || tr.resumes[1] != strconv.FormatUint(want[0], 10) {
		t.Errorf("stream requests with Last-Event-ID %q, want none then %d", tr.resumes, want[0])
	}
}
