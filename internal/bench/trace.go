package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/formica-run/formica/internal/tracing/export"
)

// TraceSink is what the suite's OTLP receiver got.
type TraceSink struct {
	Exports int64 `json:"exports"`
	Bytes   int64 `json:"bytes"`
}

// sink is an OTLP/HTTP endpoint that reads each export and answers 200
// without decoding it: a collector's cost is not the exporting process's.
type sink struct {
	exports, bytes atomic.Int64
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	s.exports.Add(1)
	s.bytes.Add(n)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

func (s *sink) stats() *TraceSink {
	return &TraceSink{Exports: s.exports.Load(), Bytes: s.bytes.Load()}
}

// startTracing starts a receiver on loopback and installs the exporter the
// programs use (export.Setup) pointed at it; stop flushes what is left,
// shuts the receiver down and puts the no-op provider back.
func startTracing(ctx context.Context) (*sink, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("trace receiver: %w", err)
	}
	s := &sink{}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) // ends with Shutdown; the exporter reports its own failures
	prev := otel.GetTracerProvider()
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + ln.Addr().String(), "OTEL_SERVICE_NAME": "formica-bench"}
	shutdown, _, err := export.Setup(ctx, "formica-bench", func(k string) string { return env[k] })
	if err != nil {
		srv.Close()
		return nil, nil, err
	}
	return s, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), export.ShutdownTimeout)
		defer cancel()
		shutdown(sctx)
		srv.Shutdown(sctx)
		otel.SetTracerProvider(prev)
	}, nil
}
