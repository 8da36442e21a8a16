package broker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/broker/brokertest"
)

// freeAddr is a loopback address nothing listens on (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// retryLog signals each "retrying" line ConnectRetry logs.
type retryLog struct{ lines chan string }

func (r retryLog) Enabled(context.Context, slog.Level) bool { return true }
func (r retryLog) Handle(_ context.Context, rec slog.Record) error {
	if strings.Contains(rec.Message, "retrying") {
		select {
		case r.lines <- rec.Message:
		default:
		}
	}
	return nil
}
func (r retryLog) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r retryLog) WithGroup(string) slog.Handler      { return r }

// A process started before its NATS server connects once the server is up.
func TestConnectRetryWaitsForServer(t *testing.T) {
	addr := freeAddr(t)
	logs := retryLog{lines: make(chan string, 16)}
	cfg := broker.ClientConfig{URLs: []string{"nats://" + addr}, Logger: slog.New(logs), Timeout: time.Second}
	type result struct {
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := broker.ConnectRetry(ctxT(t, 60*time.Second), cfg, 0)
		if nc != nil {
			defer nc.Close()
			err = errors.Join(err, nc.Publish("formica.retry", nil))
		}
		done <- result{err}
	}()
	select {
	case <-logs.lines:
	case r := <-done:
		t.Fatalf("ConnectRetry returned before any server was up: %v", r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("no retry logged within 30s")
	}
	brokertest.Start(t, brokertest.WithoutJetStream(), brokertest.WithConfig(func(c *broker.ServerConfig) { c.Listen = addr }))
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("ConnectRetry: %v", r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("not connected within 30s of the server starting")
	}
}

func TestConnectRetryTimeout(t *testing.T) {
	cfg := broker.ClientConfig{URLs: []string{"nats://" + freeAddr(t)}, Timeout: 200 * time.Millisecond}
	_, err := broker.ConnectRetry(ctxT(t, 30*time.Second), cfg, 600*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "--connect-timeout 600ms") {
		t.Fatalf("err = %v, want a connect timeout naming --connect-timeout", err)
	}
}

// A server that refused a first attempt and then stops answering: the
// deadline cuts the next attempt short, and the error still names the
// refusal, not only the timeout.
func TestConnectRetryTimeoutKeepsLastRefusal(t *testing.T) {
	s := brokertest.Start(t, brokertest.WithToken("s3cret"), brokertest.WithoutJetStream())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for i := 0; ; i++ {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			if i > 0 {
				continue // frozen: accepts and says nothing
			}
			up, err := net.Dial("tcp", strings.TrimPrefix(s.ClientURL(), "nats://"))
			if err != nil {
				c.Close()
				continue
			}
			t.Cleanup(func() { up.Close() })
			go io.Copy(up, c)
			go io.Copy(c, up)
		}
	}()
	cfg := broker.ClientConfig{URLs: []string{"nats://" + l.Addr().String()}, Timeout: 30 * time.Second}
	_, err = broker.ConnectRetry(ctxT(t, 30*time.Second), cfg, time.Second)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("err = %v, want the connect timeout and the earlier authorization violation", err)
	}
}

// A refusal of the credentials ends a ConnectRetry at once with
// StopOnRefusal, as the CLI sets it; without, it is retried like a server
// not up yet, until the timeout.
func TestConnectRetryStopOnRefusal(t *testing.T) {
	s := brokertest.Start(t, brokertest.WithToken("s3cret"), brokertest.WithoutJetStream())
	logs := retryLog{lines: make(chan string, 16)}
	cfg := broker.ClientConfig{URLs: []string{s.ClientURL()}, Token: "wrong", Logger: slog.New(logs), StopOnRefusal: true}
	_, err := broker.ConnectRetry(ctxT(t, 30*time.Second), cfg, 0)
	if !broker.Refused(err) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the authorization violation at once", err)
	}
	if len(logs.lines) != 0 {
		t.Fatalf("retried a refusal: %q", <-logs.lines)
	}

	cfg.StopOnRefusal = false
	_, err = broker.ConnectRetry(ctxT(t, 30*time.Second), cfg, 400*time.Millisecond)
	if !broker.Refused(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the refusal retried until the timeout", err)
	}
	if len(logs.lines) == 0 {
		t.Fatal("a refusal was not retried without StopOnRefusal")
	}
}

func TestConnectRetryStopsOnBadConfig(t *testing.T) {
	cfg := broker.ClientConfig{URLs: []string{"nats://" + freeAddr(t)}, Token: "t", User: "u"}
	_, err := broker.ConnectRetry(ctxT(t, 30*time.Second), cfg, 0)
	if !errors.Is(err, broker.ErrInvalidConfig) {
		t.Fatalf("err = %v, want ErrInvalidConfig at once", err)
	}
}

func ExampleConnectRetry() {
	// A worker waits for its NATS server as long as it takes; Ctrl-C or
	// SIGTERM (ctx) ends the wait.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := broker.ConnectRetry(ctx, broker.ClientConfig{URLs: []string{"nats://127.0.0.1:1"}}, 0)
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	// Output: true
}
