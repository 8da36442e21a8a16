package export_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/formica-run/formica/internal/tracing"
	"github.com/formica-run/formica/internal/tracing/export"
	"github.com/formica-run/formica/test/otlp"
)

// env is a fake environment: only what the map holds is set.
func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// emit starts and ends a run's spans the way the programs do.
func emit(ctx context.Context) string {
	ctx, sub := tracing.StartSubmit(ctx, "run-1")
	actx, agent := tracing.StartInvokeAgent(ctx, tracing.Agent{Name: "formica", ThreadID: "t1", RunID: "run-1"})
	_, chat := tracing.StartChat(actx, "openai", "m")
	tracing.EndChat(chat, "", "m", "stop", 1, 2, nil)
	tracing.EndInvokeAgent(agent, 1, 2, "succeeded", "")
	sub.End()
	return tracing.TraceID(ctx)
}

func TestNothingSetExportsNothing(t *testing.T) {
	rcv := otlp.Start(t)
	before := otel.GetTracerProvider()
	for name, vars := range map[string]map[string]string{
		"none set": {},
		// Service and resource alone name no exporter.
		"service only":  {"OTEL_SERVICE_NAME": "x", "OTEL_RESOURCE_ATTRIBUTES": "a=b", "OTEL_TRACES_SAMPLER": "always_on"},
		"exporter none": {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL},
	} {
		t.Run(name, func(t *testing.T) {
			shutdown, enabled, err := export.Setup(context.Background(), "formica-test", env(vars))
			if err != nil || enabled {
				t.Fatalf("Setup = enabled %v, %v; want off", enabled, err)
			}
			if otel.GetTracerProvider() != before {
				t.Fatal("Setup installed a tracer provider")
			}
			if id := emit(context.Background()); id != "" {
				t.Errorf("spans recorded a trace %s with tracing off", id)
			}
			if err := shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
	if n := rcv.Requests(); n != 0 {
		t.Fatalf("the receiver got %d exports with tracing off", n)
	}
}

func TestBadConfigRefused(t *testing.T) {
	for _, vars := range []map[string]string{
		{"OTEL_TRACES_EXPORTER": "zipkin"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
	} {
		if _, _, err := export.Setup(context.Background(), "formica-test", env(vars)); !errors.Is(err, export.ErrConfig) {
			t.Errorf("Setup(%v) = %v, want ErrConfig", vars, err)
		}
	}
}

// TestEndpointExports is the positive side: an endpoint alone turns the
// OTLP/HTTP exporter on, the shutdown flushes, and the environment's
// service name and resource attributes win over the program's.
func TestEndpointExports(t *testing.T) {
	rcv := otlp.Start(t)
	before := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(before) })
	shutdown, enabled, err := export.Setup(context.Background(), "formica-test", env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL,
		"OTEL_SERVICE_NAME":           "from-env",
		"OTEL_RESOURCE_ATTRIBUTES":    "deployment.environment=test",
	}))
	if err != nil || !enabled {
		t.Fatalf("Setup = enabled %v, %v", enabled, err)
	}
	id := emit(context.Background())
	if id == "" {
		t.Fatal("no trace id with tracing on")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	if len(spans) != 3 {
		t.Fatalf("got %d spans, want 3 (submit_run, invoke_agent, chat)", len(spans))
	}
	for _, s := range spans {
		if s.Service != "from-env" {
			t.Errorf("span %s: service %q, want from-env", s.Name, s.Service)
		}
		if s.Resource["service.instance.id"] == "" || s.Resource["service.version"] == "" || s.Resource["deployment.environment"] != "test" {
			t.Errorf("span %s: resource %v, want service.instance.id, service.version and deployment.environment", s.Name, s.Resource)
		}
		if got := traceHex(s.TraceId); got != id {
			t.Errorf("span %s: trace %s, want %s", s.Name, got, id)
		}
	}
}

func traceHex(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
