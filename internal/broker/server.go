package broker

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// DefaultJetStreamWait bounds WaitJetStreamReady when its context has no
// deadline. A loopback cluster elects its meta leader in 0.4–7 s (docs/nats.md).
const DefaultJetStreamWait = 30 * time.Second

// Server is a running embedded NATS server.
type Server struct {
	ns   *server.Server
	cfg  ServerConfig
	log  *serverLogger
	once sync.Once
}

// StartServer starts an embedded NATS server and waits, bounded by
// readyTimeout and ctx, until it accepts connections. A start-up failure
// the server only logs (port in use, unusable store) is returned at once.
//
// StartServer does not wait for a clustered JetStream node's meta leader:
// that needs a quorum of peers, which may start after this node (or later
// in the same process). Call WaitJetStreamReady before creating streams.
func StartServer(ctx context.Context, cfg ServerConfig) (*Server, error) {
	opts, err := cfg.options()
	if err != nil {
		return nil, err
	}
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("broker: new server: %w", err)
	}
	s := &Server{ns: ns, cfg: cfg, log: newServerLogger(cfg.Logger)}
	debug, trace := s.log.levels()
	ns.SetLoggerV2(s.log, debug, trace, false)
	ns.Start()

	if err := s.waitReady(ctx); err != nil {
		s.Shutdown()
		return nil, err
	}
	if cfg.JetStream && !ns.JetStreamEnabled() {
		s.Shutdown()
		return nil, fmt.Errorf("%w: JetStream did not start", ErrNotReady)
	}
	return s, nil
}

func (s *Server) waitReady(ctx context.Context) error {
	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	for {
		// Short polls so a fatal log or a cancelled ctx is seen promptly.
		if s.ns.ReadyForConnections(50 * time.Millisecond) {
			return nil
		}
		select {
		case err := <-s.log.fatal:
			return fmt.Errorf("%w: %w", ErrNotReady, err)
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-timer.C:
			return fmt.Errorf("%w: not accepting connections after %s", ErrNotReady, readyTimeout)
		default:
		}
	}
}

// WaitJetStreamReady waits until JetStream can serve requests: at once for
// a single server, until a meta leader is known and this node has caught up
// for a clustered one. Bounded by ctx, or DefaultJetStreamWait when ctx has
// no deadline.
func (s *Server) WaitJetStreamReady(ctx context.Context) error {
	if !s.cfg.JetStream {
		return ErrJetStreamDisabled
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultJetStreamWait)
		defer cancel()
	}
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.jetStreamReady() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: no JetStream meta leader: %w", ErrNotReady, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

func (s *Server) jetStreamReady() bool {
	if !s.ns.JetStreamEnabled() {
		return false
	}
	if !s.ns.JetStreamIsClustered() {
		return true
	}
	info, err := s.ns.Jsz(nil)
	if err != nil || info.Meta == nil || info.Meta.Leader == "" {
		return false
	}
	return s.ns.JetStreamIsCurrent()
}

// ClientURL is the TCP URL clients on other processes use, or "" when the
// server has no listener. A wildcard listen address is reported as
// 127.0.0.1, which is reachable from the same host.
func (s *Server) ClientURL() string {
	return tcpURL(s.ns.Addr())
}

func tcpURL(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok || ta == nil {
		return ""
	}
	host := ta.IP.String()
	if ta.IP == nil || ta.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "nats://" + net.JoinHostPort(host, strconv.Itoa(ta.Port))
}

// NATS exposes the underlying server for monitoring (Jsz, Varz, NumRoutes)
// and tests. Do not Shutdown it directly: use Server.Shutdown.
func (s *Server) NATS() *server.Server { return s.ns }

// InterestOf returns a test of whether anything in the account of nc, a
// connection to this server, subscribes to a subject: a client of this
// server, a stream, or a client of another node of its cluster (routes
// share their subscriptions). A publisher on this server may skip a
// message nobody would receive; the server would drop it anyway.
func (s *Server) InterestOf(nc *nats.Conn) (func(subject string) bool, error) {
	cid, err := nc.GetClientID()
	if err != nil {
		return nil, fmt.Errorf("broker: interest: %w", err)
	}
	cz, err := s.ns.Connz(&server.ConnzOptions{CID: cid, Username: true})
	if err != nil || len(cz.Conns) != 1 {
		return nil, fmt.Errorf("broker: interest: connection %d not found on this server (%v)", cid, err)
	}
	name := cmp.Or(cz.Conns[0].Account, server.DEFAULT_GLOBAL_ACCOUNT)
	acc, err := s.ns.LookupAccount(name)
	if err != nil {
		return nil, fmt.Errorf("broker: interest: account %s: %w", name, err)
	}
	return acc.SubscriptionInterest, nil
}

// Connect opens a client connection over the in-process pipe, always, even
// when the server listens on TCP: it skips the network stack (about 3x lower
// latency, docs/nats.md) and cannot be refused by a firewall. The configured
// Token or User/Password is supplied, and async errors are logged to the
// server's Logger. opts are applied last and may override any of this.
//
// An in-process client never fails over to another node; use the package
// Connect with every node's URL for that.
func (s *Server) Connect(name string, opts ...nats.Option) (*nats.Conn, error) {
	base := []nats.Option{nats.Name(name), nats.InProcessServer(pipeServer{s.ns})}
	switch {
	case s.cfg.Token != "":
		base = append(base, nats.Token(s.cfg.Token))
	case s.cfg.User != "":
		base = append(base, nats.UserInfo(s.cfg.User, s.cfg.Password))
	}
	base = append(base, connHandlers(s.cfg.Logger, name)...)
	nc, err := nats.Connect("", append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("broker: in-process connect %q: %w", name, err)
	}
	return nc, nil
}

// Shutdown stops the server and waits until it has stopped. Safe to call
// twice and from several goroutines. Drain the process's own connections
// first (Drain) so their buffered publishes are not lost.
func (s *Server) Shutdown() {
	s.once.Do(func() {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
	})
}
