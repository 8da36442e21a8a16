package broker

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
)

// Backoff of ConnectRetry's first connection: doubling from the first pause
// to the cap, each pause jittered by up to a quarter so a fleet started at
// once does not dial in lockstep.
const (
	RetryFirstPause = 250 * time.Millisecond
	RetryMaxPause   = 5 * time.Second
)

// ConnectRetry is Connect for processes that may start before their NATS
// server (compose, Kubernetes, systemd give no start order): it retries a
// failed first connection with backoff, logging each failure with the next
// pause, until it connects, ctx ends, or timeout passes (0: no limit). An
// invalid config fails at once; it would fail the same way every time. So
// does a refusal of the credentials with cfg.StopOnRefusal.
// Once connected, the connection reconnects by itself (see Connect).
func ConnectRetry(ctx context.Context, cfg ClientConfig, timeout time.Duration, opts ...nats.Option) (*nats.Conn, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, errConnectTimeout{timeout})
		defer cancel()
	}
	log := cmp.Or(cfg.Logger, discardLogger)
	pause := RetryFirstPause
	var last error // the last attempt's reason, kept for an attempt the deadline cuts short
	for attempt := 1; ; attempt++ {
		nc, err := Connect(ctx, cfg, opts...)
		if err == nil {
			if attempt > 1 {
				log.Info("nats connected", "url", redact(nc.ConnectedUrl()), "attempts", attempt)
			}
			return nc, nil
		}
		if errors.Is(err, ErrInvalidConfig) || (cfg.StopOnRefusal && Refused(err)) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, errors.Join(last, err)
		}
		last = err
		wait := pause + rand.N(pause/4+1)
		log.Warn("nats not reachable yet, retrying", "servers", redact(cfg.servers()), "attempt", attempt, "retry_in", wait.Round(time.Millisecond), "err", err)
		select {
		case <-ctx.Done():
			return nil, errors.Join(err, context.Cause(ctx))
		case <-time.After(wait):
		}
		pause = min(2*pause, RetryMaxPause)
	}
}

// Refused reports a server's refusal of a client's credentials: an
// authorization violation, or credentials expired or revoked.
func Refused(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired)
}

// errConnectTimeout is the cause of a ConnectRetry that ran out of time.
type errConnectTimeout struct{ d time.Duration }

func (e errConnectTimeout) Error() string {
	return "no connection within --connect-timeout " + e.d.String()
}

// Is makes errors.Is(err, context.DeadlineExceeded) hold.
func (e errConnectTimeout) Is(target error) bool { return target == context.DeadlineExceeded }
