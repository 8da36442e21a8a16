// Package export installs the global tracer provider from the standard
// OpenTelemetry environment, and nothing else configures it:
//
//   - OTEL_TRACES_EXPORTER: otlp (default once an endpoint is set), console
//     (stderr), or none;
//   - OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
//     OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf, the default, or grpc),
//     OTEL_EXPORTER_OTLP_HEADERS, read by the OTLP exporters themselves;
//   - OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES; OTEL_TRACES_SAMPLER and
//     OTEL_TRACES_SAMPLER_ARG, OTEL_BSP_*, read by the SDK.
//
// With none of the exporter variables set, no provider is installed: spans
// stay no-ops and nothing dials localhost or retries.
package export

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	neturl "net/url"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/formica-run/formica/internal/version"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ErrConfig marks an environment that names an exporter or protocol this
// build does not know.
var ErrConfig = errors.New("tracing: bad OTEL configuration")

// Setup installs a tracer provider for service (the default
// OTEL_SERVICE_NAME) when the environment asks for one, and returns a
// shutdown that flushes it, bounded by its ctx. getenv reads the environment.
// enabled says whether spans are exported.
func Setup(ctx context.Context, service string, getenv func(string) string) (shutdown func(context.Context) error, enabled bool, err error) {
	noop := func(context.Context) error { return nil }
	kind := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")))
	endpoint := getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	switch {
	case kind == "none", kind == "" && !endpoint:
		return noop, false, nil
	case kind == "":
		kind = "otlp"
	}
	var exp sdktrace.SpanExporter
	switch kind {
	case "otlp":
		proto := cmp.Or(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
		// Endpoint and headers are passed from getenv (over what the
		// exporters would read themselves), so the environment Setup was
		// given is the one that counts.
		url, headers := endpointURL(getenv, proto), headersOf(getenv)
		switch strings.ToLower(strings.TrimSpace(proto)) {
		case "", "http/protobuf":
			exp, err = otlptracehttp.New(ctx, otlpOptions(url, headers, otlptracehttp.WithEndpointURL, otlptracehttp.WithHeaders)...)
		case "grpc":
			exp, err = otlptracegrpc.New(ctx, otlpOptions(url, headers, otlptracegrpc.WithEndpointURL, otlptracegrpc.WithHeaders)...)
		default:
			return noop, false, fmt.Errorf("%w: OTEL_EXPORTER_OTLP_PROTOCOL=%q (want http/protobuf or grpc)", ErrConfig, proto)
		}
	case "console":
		exp, err = stdouttrace.New(stdouttrace.WithWriter(os.Stderr))
	default:
		return noop, false, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q (want otlp, console or none)", ErrConfig, kind)
	}
	if err != nil {
		return noop, false, fmt.Errorf("tracing: exporter: %w", err)
	}
	// Each process is an instance of its own, so a trace tells which of a
	// fleet's workers spent what.
	res, err := resource.Merge(resource.Default(),
		resource.NewSchemaless(attribute.String("service.name", service),
			attribute.String("service.instance.id", uuid.NewString()),
			attribute.String("service.version", version.Version())))
	if err == nil {
		// The environment's service name and attributes win over the default.
		res, err = resource.Merge(res, envResource(getenv))
	}
	if err != nil {
		return noop, false, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, ShutdownTimeout)
			defer cancel()
		}
		return tp.Shutdown(ctx)
	}, true, nil
}

// endpointURL is where traces go: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as
// given, else OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces added over HTTP;
// "" leaves the exporter's default.
func endpointURL(getenv func(string) string, proto string) string {
	if u := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); u != "" {
		return u
	}
	u := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	if u == "" || strings.EqualFold(strings.TrimSpace(proto), "grpc") {
		return u
	}
	return strings.TrimRight(u, "/") + "/v1/traces"
}

// otlpOptions are an OTLP exporter's options setting url and headers, each
// left to the exporter when empty.
func otlpOptions[O any](url string, headers map[string]string, withURL func(string) O, withHeaders func(map[string]string) O) []O {
	var opts []O
	if url != "" {
		opts = append(opts, withURL(url))
	}
	if len(headers) > 0 {
		opts = append(opts, withHeaders(headers))
	}
	return opts
}

// headersOf reads OTEL_EXPORTER_OTLP_HEADERS and, over it,
// OTEL_EXPORTER_OTLP_TRACES_HEADERS: key=value pairs, comma separated,
// values URL-encoded.
func headersOf(getenv func(string) string) map[string]string {
	h := map[string]string{}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		for _, kv := range strings.Split(getenv(name), ",") {
			k, v, ok := strings.Cut(kv, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				continue
			}
			if dec, err := neturl.QueryUnescape(strings.TrimSpace(v)); err == nil {
				v = dec
			}
			h[k] = strings.TrimSpace(v)
		}
	}
	return h
}

// envResource reads OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME through
// getenv (the SDK's own detector reads only the process environment).
func envResource(getenv func(string) string) *resource.Resource {
	var attrs []attribute.KeyValue
	for _, kv := range strings.Split(getenv("OTEL_RESOURCE_ATTRIBUTES"), ",") {
		k, v, ok := strings.Cut(kv, "=")
		if k = strings.TrimSpace(k); ok && k != "" {
			attrs = append(attrs, attribute.String(k, strings.TrimSpace(v)))
		}
	}
	if s := strings.TrimSpace(getenv("OTEL_SERVICE_NAME")); s != "" {
		attrs = append(attrs, attribute.String("service.name", s))
	}
	return resource.NewSchemaless(attrs...)
}

// ShutdownTimeout bounds how long a program waits on exit for its last spans
// to be sent.
const ShutdownTimeout = 5 * time.Second

// Start is Setup for a program: it logs whether spans are exported, and
// returns a stop that flushes them within ShutdownTimeout and logs a
// failure to.
func Start(ctx context.Context, service string, logger *slog.Logger) (stop func(), err error) {
	shutdown, enabled, err := Setup(ctx, service, os.Getenv)
	if err != nil {
		return func() {}, err
	}
	if enabled {
		logger.Info("tracing on", "service", service)
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			logger.Warn("tracing: spans not flushed", "err", err)
		}
	}, nil
}
