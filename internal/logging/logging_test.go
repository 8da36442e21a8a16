package logging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/formica-run/formica/internal/logging"
)

func TestJSONLinesCarryTheSpan(t *testing.T) {
	var buf bytes.Buffer
	log, err := logging.New(&buf, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	log.With("worker", "w1").InfoContext(ctx, "thread finished", "run_id", "r1", "thread_id", "t1")
	log.Info("no span", "run_id", "r1")
	log.Debug("below the level")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), buf.String())
	}
	var first, second map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"msg": "thread finished", "run_id": "r1", "thread_id": "t1", "worker": "w1",
		"trace_id": tid.String(), "span_id": sid.String(), "level": "INFO"} {
		if first[k] != want {
			t.Errorf("%s = %v, want %s", k, first[k], want)
		}
	}
	if _, ok := second["trace_id"]; ok {
		t.Errorf("a line logged without a span has a trace_id: %s", lines[1])
	}
}

func TestBadLevelOrFormatRefused(t *testing.T) {
	for _, c := range [][2]string{{"loud", "text"}, {"info", "xml"}} {
		if _, err := logging.New(&bytes.Buffer{}, c[0], c[1]); err == nil {
			t.Errorf("New(%q, %q) accepted", c[0], c[1])
		}
	}
	var buf bytes.Buffer
	log, err := logging.New(&buf, "warn", "")
	if err != nil {
		t.Fatal(err)
	}
	log.Warn("plain")
	if !strings.HasPrefix(buf.String(), "time=") {
		t.Errorf("the default format is not text: %q", buf.String())
	}
}

// Floor keeps a component's records below its level out, and the base
// logger's level still holds.
func TestFloor(t *testing.T) {
	var buf bytes.Buffer
	base, err := logging.New(&buf, "info", "text")
	if err != nil {
		t.Fatal(err)
	}
	l := logging.Floor(base, slog.LevelWarn).With("component", "nats")
	l.Info("banner")
	l.Warn("slow consumer")
	l.Debug("trace")
	if got := buf.String(); strings.Contains(got, "banner") || !strings.Contains(got, `msg="slow consumer" component=nats`) {
		t.Fatalf("log:\n%s", got)
	}
	if logging.Floor(nil, slog.LevelWarn) != nil {
		t.Fatal("Floor(nil) is not nil")
	}
}
