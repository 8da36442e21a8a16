package broker

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// Drain drains nc and waits until it is CLOSED, at most timeout. nc.Drain
// only starts draining; returning before it finishes would let a caller shut
// the server down under unflushed publishes and unfinished handlers.
//
// On timeout the connection is closed anyway and ErrDrainTimeout returned.
// An already closed connection is not an error. A connection caught
// reconnecting cannot drain: nats.go closes it and Drain returns
// nats.ErrConnectionReconnecting, since buffered publishes were dropped.
func Drain(nc *nats.Conn, timeout time.Duration) error {
	closed := nc.StatusChanged(nats.CLOSED)
	defer nc.RemoveStatusListener(closed)

	if err := nc.Drain(); err != nil {
		if errors.Is(err, nats.ErrConnectionClosed) {
			return nil
		}
		return fmt.Errorf("broker: drain: %w", err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	// The status event can be missed if the listener's buffer is full, so
	// poll IsClosed as well.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !nc.IsClosed() {
		select {
		case <-closed:
		case <-tick.C:
		case <-timer.C:
			nc.Close()
			return fmt.Errorf("%w after %s", ErrDrainTimeout, timeout)
		}
	}
	if err := nc.LastError(); errors.Is(err, nats.ErrDrainTimeout) {
		return fmt.Errorf("%w: %w", ErrDrainTimeout, err)
	}
	return nil
}
