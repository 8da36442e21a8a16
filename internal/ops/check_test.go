package ops

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestCheckAndHealthcheck(t *testing.T) {
	var notReady atomic.Pointer[error]
	s, err := Start(Config{Addr: "127.0.0.1:0", Ready: func(context.Context) error {
		if e := notReady.Load(); e != nil {
			return *e
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	base := "http://" + s.Addr()
	for _, p := range []string{"/healthz", "/readyz"} {
		if err := Check(ctx, base+p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if err := Check(ctx, base+"/metrics"); !errors.Is(err, ErrUnhealthy) {
		t.Errorf("/metrics without a handler: %v, want ErrUnhealthy (404)", err)
	}
	e := errors.New("NATS not connected")
	notReady.Store(&e)
	if err := Check(ctx, base+"/healthz"); err != nil {
		t.Errorf("/healthz while not ready: %v", err)
	}
	err = Check(ctx, base+"/readyz")
	if !errors.Is(err, ErrUnhealthy) || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "NATS not connected") {
		t.Fatalf("/readyz while not ready: %v, want 503 with the reason", err)
	}

	// The healthcheck command probes the program's own --http address,
	// a wildcard host on loopback.
	_, port, _ := strings.Cut(s.Addr(), ":")
	var out, errOut bytes.Buffer
	if code := Healthcheck("worker", "0.0.0.0:"+port, nil, &out, &errOut); code != 0 {
		t.Fatalf("healthcheck: exit %d: %s", code, errOut.String())
	}
	if code := Healthcheck("worker", ":"+port, []string{"--ready"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "NATS not connected") {
		t.Fatalf("healthcheck --ready: exit %d: %s", code, errOut.String())
	}
	for _, addr := range []string{"", "off"} {
		if code := Healthcheck("worker", addr, nil, &out, &errOut); code != 2 {
			t.Fatalf("healthcheck with --http %q: exit %d, want 2", addr, code)
		}
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := Healthcheck("worker", s.Addr(), []string{"--timeout", "2s"}, &out, &errOut); code != 1 {
		t.Fatalf("healthcheck of a stopped listener: exit %d, want 1", code)
	}
}

func TestProbeURL(t *testing.T) {
	for addr, want := range map[string]string{
		":8080":          "http://127.0.0.1:8080/healthz",
		"0.0.0.0:8080":   "http://127.0.0.1:8080/healthz",
		"[::]:8080":      "http://127.0.0.1:8080/healthz",
		"10.0.0.5:9":     "http://10.0.0.5:9/healthz",
		"localhost:8080": "http://localhost:8080/healthz",
	} {
		got, err := ProbeURL(addr, "/healthz")
		if err != nil || got != want {
			t.Errorf("ProbeURL(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
	if _, err := ProbeURL("nonsense", "/healthz"); err == nil {
		t.Error("ProbeURL accepted an address without a port")
	}
}
