package event

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formica-run/formica/internal/model"
)

func TestMarshalRoundTrip(t *testing.T) {
	e := Event{Type: ModelCall, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), RunID: "r", ThreadID: "t",
		ParentID: "p", Depth: 2, Name: "n", Model: "sim", Usage: model.Usage{InputTokens: 3, OutputTokens: 4},
		Latency: Duration(1500 * time.Millisecond)}
	b, err := Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"latency_ms":1500`) || strings.Contains(string(b), "\n") {
		t.Errorf("not one line with latency in whole milliseconds: %s", b)
	}
	got, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(e, got); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
}

func TestUnmarshalRefuses(t *testing.T) {
	for _, in := range []string{"", "junk", `[1]`, `{"run_id":"r"}`, `{"type":1}`, "\x83\xa1t\xa5event"} {
		if _, err := Unmarshal([]byte(in)); !errors.Is(err, ErrBadEvent) {
			t.Errorf("Unmarshal(%q) = %v, want ErrBadEvent", in, err)
		}
	}
	if e, err := Unmarshal([]byte(`{"type":"thread.replaced","run_id":"r","future_field":{"x":1}}`)); err != nil || e.Type != ThreadReplaced {
		t.Errorf("unknown fields: %v %v", e, err)
	}
}

// FuzzUnmarshal: events arrive from the network; no input may panic, and
// whatever decodes encodes and decodes again to the same event.
func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"type":"model.call","run_id":"r","latency_ms":12,"usage":{"input_tokens":1}}`))
	f.Add([]byte(`{"type":"x","time":"2026-01-01T00:00:00Z","depth":-1}`))
	f.Add([]byte(`{"type":"x","latency_ms":1e30}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Unmarshal(data)
		if err != nil {
			return
		}
		b, err := Marshal(e)
		if err != nil {
			return // a time outside JSON's years
		}
		again, err := Unmarshal(b)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", b, err)
		}
		if d := cmp.Diff(e, again); d != "" {
			t.Fatalf("(-first +second):\n%s", d)
		}
	})
}
