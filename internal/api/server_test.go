package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestNewRefusesInsecureAddresses(t *testing.T) {
	tests := []struct {
		addr  string
		token string
		want  error
	}{
		{"", "", nil}, // DefaultAddr
		{"127.0.0.1:8080", "", nil},
		{"127.9.9.9:0", "", nil},
		{"localhost:8080", "", nil},
		{"LocalHost:8080", "", nil},
		{"[::1]:8080", "", nil},
		{"[::ffff:127.0.0.1]:8080", "", nil},
		{"0.0.0.0:8080", "", ErrInsecure},
		{":8080", "", ErrInsecure},
		{"[::]:8080", "", ErrInsecure},
		{"192.168.1.10:8080", "", ErrInsecure},
		{"example.com:8080", "", ErrInsecure},
		{"localhost.example.com:8080", "", ErrInsecure},
		{"0.0.0.0:8080", "tok", nil},
		{":8080", "tok", nil},
		{"127.0.0.1", "", ErrConfig}, // no port
		{"127.0.0.1:80", " tok\n", ErrConfig},
	}
	for _, tt := range tests {
		t.Run(tt.addr+"/"+tt.token, func(t *testing.T) {
			_, err := New(Config{Addr: tt.addr, Token: tt.token}, newFake())
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("New: %v, want %v", err, tt.want)
			}
		})
	}
	_, err := New(Config{Addr: "0.0.0.0:8080"}, newFake())
	if err == nil || !strings.Contains(err.Error(), "set a token") {
		t.Errorf("the refusal should say what to do: %v", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		b    Backend
	}{
		{"no backend", Config{}, nil},
		{"negative MaxBody", Config{MaxBody: -1}, newFake()},
		{"negative KeepAlive", Config{KeepAlive: -time.Second}, newFake()},
		{"negative MaxStreams", Config{MaxStreams: -1}, newFake()},
	}
	for _, tt := range tests {
		if _, err := New(tt.cfg, tt.b); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", tt.name, err)
		}
	}
	s, err := New(Config{}, newFake())
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.Addr != DefaultAddr || s.cfg.MaxBody != DefaultMaxBody || s.cfg.KeepAlive != DefaultKeepAlive || s.cfg.MaxStreams != DefaultMaxStreams {
		t.Errorf("defaults: %+v", s.cfg)
	}
}

func TestStartAndShutdown(t *testing.T) {
	s, err := New(Config{Addr: "127.0.0.1:0", Token: testToken}, newFake())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(s.Addr(), ":0") {
		t.Fatalf("Addr = %s, want the real port", s.Addr())
	}
	if err := s.Start(); !errors.Is(err, ErrServerClosed) {
		t.Errorf("second Start: %v, want ErrServerClosed", err)
	}
	resp, err := http.Get("http://" + s.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"status":"ok"}` {
		t.Errorf("healthz: %d %s", resp.StatusCode, body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range 2 { // safe twice
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}
	if _, err := http.Get("http://" + s.Addr() + "/healthz"); err == nil {
		t.Error("still serving after Shutdown")
	}
	if err := s.Start(); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Start after Shutdown: %v, want ErrServerClosed", err)
	}
}

func TestStartFailsOnBusyPort(t *testing.T) {
	a, err := New(Config{Addr: "127.0.0.1:0"}, newFake())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	b, err := New(Config{Addr: a.Addr()}, newFake())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err == nil {
		b.Shutdown(context.Background())
		t.Fatal("two servers on one port")
	}
}
