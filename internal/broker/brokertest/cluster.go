package brokertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/broker"
)

// ClusterTimeout bounds cluster formation: full routes and a JetStream
// meta leader. docs/nats.md saw 0.4 s to 7 s on loopback; -race and a busy CI
// machine need headroom.
const ClusterTimeout = 30 * time.Second

// clusterAttempts retries a start that lost a reserved port to another
// process between reservation and listen.
const clusterAttempts = 3

// StartCluster starts an n-node loopback cluster with JetStream, each node
// with its own store under t.TempDir() and a random client port, and waits
// until every node routes to all others and knows a meta leader. Nodes are
// shut down at cleanup; a test kills one early with its Shutdown (safe to
// call again at cleanup) and reaches the rest through URLs.
func StartCluster(t testing.TB, n int, opts ...Option) []*broker.Server {
	t.Helper()
	if n < 2 {
		t.Fatalf("brokertest: a cluster needs at least 2 nodes, got %d", n)
	}
	var err error
	for range clusterAttempts {
		var ss []*broker.Server
		if ss, err = startCluster(t, n, opts); err == nil {
			return ss
		}
		if !errors.Is(err, broker.ErrNotReady) {
			break // a config error will not get better
		}
		t.Logf("brokertest: cluster start failed, retrying: %v", err)
	}
	t.Fatalf("brokertest: start cluster: %v", err)
	return nil
}

func startCluster(t testing.TB, n int, opts []Option) ([]*broker.Server, error) {
	// Every node must be given routes before it starts (JetStream insists
	// on configured routes), so the route ports are reserved up front.
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	routes := make([]string, n)
	for i, p := range ports {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	ss := make([]*broker.Server, 0, n)
	fail := func(err error) ([]*broker.Server, error) {
		for _, s := range ss {
			s.Shutdown()
		}
		return nil, err
	}
	begin := time.Now()
	for i := range n {
		s, err := startNode(t, i+1, &broker.ClusterConfig{
			Name:   "formica-test",
			Listen: fmt.Sprintf("127.0.0.1:%d", ports[i]),
			Routes: routes,
		}, opts)
		if err != nil {
			return fail(err)
		}
		ss = append(ss, s)
	}
	if err := WaitCluster(ss, ClusterTimeout); err != nil {
		return fail(err)
	}
	t.Logf("brokertest: %d-node cluster formed in %s", n, time.Since(begin).Round(time.Millisecond))
	for _, s := range ss {
		t.Cleanup(s.Shutdown)
	}
	return ss, nil
}

// WaitCluster waits until each running node of ss has routes to every
// other running node and a JetStream meta leader, at most timeout. Use it
// after killing a node, before the next JetStream step that needs a leader.
func WaitCluster(ss []*broker.Server, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	live := slices.DeleteFunc(slices.Clone(ss), func(s *broker.Server) bool { return !s.NATS().Running() })
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for _, s := range live {
		for s.NATS().NumRemotes() < len(live)-1 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w: %s routes to %d of %d peers after %s",
					broker.ErrNotReady, s.NATS().Name(), s.NATS().NumRemotes(), len(live)-1, timeout)
			case <-tick.C:
			}
		}
	}
	for _, s := range live {
		if err := s.WaitJetStreamReady(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.NATS().Name(), err)
		}
	}
	// A leader alone is not enough: until it has stats from every peer it
	// refuses to place replicas ("no suitable peers for placement").
	for !placementReady(live) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: meta leader does not see all %d peers after %s", broker.ErrNotReady, len(live), timeout)
		case <-tick.C:
		}
	}
	return nil
}

// placementReady reports whether the meta leader among live sees every
// live node as online with stats, the condition for placing n replicas.
func placementReady(live []*broker.Server) bool {
	for _, s := range live {
		if s.NATS().JetStreamIsLeader() {
			return len(s.NATS().JetStreamClusterPeers()) >= len(live)
		}
	}
	return false
}

// freePorts reserves n loopback ports by listening and closing at once.
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("brokertest: reserve port: %w", err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}
