package broker

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds how long StartServer waits for the server to accept
// connections.
const readyTimeout = 10 * time.Second

// ServerConfig configures an embedded NATS server. The zero value is an
// in-process-only server without JetStream; the coordinator sets JetStream
// and DataDir.
type ServerConfig struct {
	// DataDir is the JetStream store directory. Required when JetStream is on:
	// an empty store dir would fall back to the temp dir and can lose data.
	DataDir string
	// JetStream enables JetStream (work queue, KV, events, object store).
	JetStream bool

	// Listen is the client TCP address. "" opens no listener: only
	// in-process clients (Server.Connect) can reach the server. A port of 0
	// or -1 picks a free port (read it back with ClientURL). An empty host
	// means 127.0.0.1; any non-loopback host needs AllowRemote, so a server
	// is never exposed to the network by accident.
	Listen string
	// AllowRemote permits non-loopback Listen, Cluster.Listen and Monitor
	// addresses.
	AllowRemote bool
	// Monitor, when set, is the address of nats-server's HTTP monitoring
	// endpoint (/varz, /jsz, /healthz, ...: what the Prometheus NATS
	// exporter and `nats server` read). Off by default; the same address
	// rules as Listen.
	Monitor string

	// ServerName names the node in logs and in the JetStream cluster. A
	// clustered JetStream node must set it and keep it across restarts:
	// JetStream identifies peers by it. Empty elsewhere: the server ID.
	ServerName string
	// Cluster, when set, joins this node to a NATS cluster. Clustered nodes
	// must have a Listen address (nats-server issue 5174).
	Cluster *ClusterConfig

	// Token, or User and Password, require clients to authenticate.
	// Server.Connect supplies them for in-process clients.
	Token    string
	User     string
	Password string
	// Trust, when set, runs the server in NATS JWT (operator) mode: it
	// configures the trusted operator and the account resolver, and every
	// client, in-process ones included, needs a user JWT it accepts
	// (auth.Authority implements it). Exclusive with Token and User.
	Trust Trust

	// TLS, when set, serves client connections over TLS; set ClientAuth to
	// require client certificates. In-process clients skip TLS.
	TLS *tls.Config

	// MaxPayload caps a message's size in bytes; 0 means the NATS default
	// (1 MiB). Larger payloads belong in the object store.
	MaxPayload int32

	// Logger receives the server's log; nil discards it. Debug and trace
	// output are produced only when the handler enables those levels (trace
	// is slog.LevelDebug-4).
	Logger *slog.Logger
}

// Trust configures a server's operator-mode authentication.
type Trust interface {
	Configure(o *server.Options) error
}

// ClusterConfig joins an embedded server to a NATS cluster.
type ClusterConfig struct {
	// Name is the cluster name, the same on every node. Required: a dynamic
	// name cannot host JetStream.
	Name string
	// Listen is the route address other nodes connect to, e.g.
	// "127.0.0.1:6222"; same host rules as ServerConfig.Listen. Required.
	Listen string
	// Routes are the other nodes' route URLs ("nats://host:6222" or
	// "host:6222"; comma-separated lists allowed). A route to this node
	// itself is harmless, so every node can be given the same list.
	Routes []string
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, a...))
}

// options translates c into nats-server options, checking every field.
func (c *ServerConfig) options() (*server.Options, error) {
	o := &server.Options{
		ServerName: c.ServerName,
		NoSigs:     true, // the process owns SIGINT/SIGTERM, not the server
		MaxPayload: c.MaxPayload,
		JetStream:  c.JetStream,
		StoreDir:   c.DataDir,
	}
	var errs []error
	if c.JetStream && c.DataDir == "" {
		errs = append(errs, invalid("JetStream needs a DataDir"))
	}
	if c.MaxPayload < 0 {
		errs = append(errs, invalid("negative MaxPayload %d", c.MaxPayload))
	}
	switch {
	case c.Token != "" && (c.User != "" || c.Password != ""):
		errs = append(errs, invalid("use Token or User/Password, not both"))
	case (c.User == "") != (c.Password == ""):
		errs = append(errs, invalid("User and Password go together"))
	}
	o.Authorization, o.Username, o.Password = c.Token, c.User, c.Password
	if c.Trust != nil {
		if c.Token != "" || c.User != "" {
			errs = append(errs, invalid("use Trust or Token/User, not both"))
		} else if err := c.Trust.Configure(o); err != nil {
			errs = append(errs, invalid("trust: %v", err))
		}
	}

	if c.Listen == "" {
		o.DontListen = true
	} else {
		var err error
		o.Host, o.Port, err = parseListen("Listen", c.Listen, c.AllowRemote)
		errs = append(errs, err) // errors.Join drops a nil
	}
	if c.Monitor != "" {
		var err error
		o.HTTPHost, o.HTTPPort, err = parseListen("Monitor", c.Monitor, c.AllowRemote)
		errs = append(errs, err)
	}
	if c.TLS != nil {
		if c.Listen == "" {
			errs = append(errs, invalid("TLS without a Listen address"))
		}
		o.TLS, o.TLSConfig = true, c.TLS
		o.TLSVerify = c.TLS.ClientAuth == tls.RequireAndVerifyClientCert
	}
	if c.Cluster != nil {
		errs = append(errs, c.Cluster.apply(o, c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return o, nil
}

func (cl *ClusterConfig) apply(o *server.Options, c *ServerConfig) error {
	var errs []error
	if cl.Name == "" {
		errs = append(errs, invalid("Cluster.Name is required"))
	}
	if c.Listen == "" {
		errs = append(errs, invalid("a clustered node must have a Listen address (in-process-only servers cannot cluster)"))
	}
	if c.JetStream && c.ServerName == "" {
		errs = append(errs, invalid("a clustered JetStream node needs a stable ServerName"))
	}
	if cl.Listen == "" {
		errs = append(errs, invalid("Cluster.Listen is required"))
	} else {
		var err error
		o.Cluster.Host, o.Cluster.Port, err = parseListen("Cluster.Listen", cl.Listen, c.AllowRemote)
		errs = append(errs, err)
	}
	o.Cluster.Name = cl.Name
	for _, r := range splitList(cl.Routes) {
		if !strings.Contains(r, "://") {
			r = "nats://" + r
		}
		u, err := url.Parse(r)
		if err != nil || u.Host == "" || u.Port() == "" {
			errs = append(errs, invalid("route %q is not host:port or nats://host:port", r))
			continue
		}
		o.Routes = append(o.Routes, u)
	}
	return errors.Join(errs...)
}

// parseListen splits a listen address and applies Formica's rules: empty
// host is loopback, port 0 means random (nats-server reads 0 as 4222), and
// only AllowRemote may name a non-loopback host.
func parseListen(field, addr string, allowRemote bool) (string, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, invalid("%s %q: %v", field, addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < -1 || port > 65535 {
		return "", 0, invalid("%s %q: bad port", field, addr)
	}
	port = cmp.Or(port, server.RANDOM_PORT)
	host = cmp.Or(host, "127.0.0.1")
	if !allowRemote && !isLoopback(host) {
		return "", 0, invalid("%s %q is not a loopback address; set AllowRemote (--nats-allow-remote) to listen on the network", field, addr)
	}
	return host, port, nil
}

func isLoopback(host string) bool {
	// A host that is no IP parses to nil, which is not loopback.
	return strings.EqualFold(host, "localhost") || net.ParseIP(host).IsLoopback()
}

// splitList flattens comma-separated entries and drops empty ones, so
// "a,b" and ["a", "b"] mean the same.
func splitList(in []string) []string {
	var out []string
	for _, s := range in {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
