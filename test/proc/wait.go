package proc

import (
	"fmt"
	"net"
	"testing"
	"time"
)

// FreePorts returns n distinct loopback ports that were free a moment ago:
// each is listened on, then all are released together. Another process may
// take one before it is used: starters retry on "address already in use".
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("reserve a port: %v", err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// NATSURL is the client URL of a NATS server on a loopback port.
func NATSURL(port int) string { return fmt.Sprintf("nats://127.0.0.1:%d", port) }

// WaitUntil polls cond every 10ms until it holds, failing with what after
// timeout.
func WaitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
