package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// ClientConfig says how a process reaches an external NATS server or
// cluster. The zero value connects to nats://127.0.0.1:4222 without auth.
//
// At most one way of authenticating may be set: Creds, NKeySeedFile, Token,
// or User with Password. TLS (CAFile, CertFile with KeyFile) combines with
// any of them.
type ClientConfig struct {
	// URLs are the servers to try, each possibly a comma-separated list
	// (as --nats takes them). Give every node of a cluster so a client can
	// start while one is down. Empty: nats.DefaultURL.
	URLs []string
	// Name identifies the connection in server monitoring and logs.
	Name string

	// Creds is a .creds file (user JWT and nkey seed), as issued by nsc.
	Creds string
	// NKeySeedFile holds an nkey seed for nkey authentication.
	NKeySeedFile string
	// Token is a bearer token.
	Token string
	// User and Password go together.
	User     string
	Password string

	// CAFile verifies the server's certificate; setting it (or CertFile)
	// makes TLS mandatory.
	CAFile string
	// CertFile and KeyFile are the client certificate for mutual TLS.
	CertFile string
	KeyFile  string

	// InboxPrefix replaces "_INBOX" so each role's reply subjects can be
	// permitted narrowly.
	InboxPrefix string

	// Logger receives connection events and async errors; nil discards.
	Logger *slog.Logger

	// ReconnectWait is the pause between reconnect rounds (plus jitter);
	// 0 means the nats.go default (2 s).
	ReconnectWait time.Duration
	// Timeout bounds each dial and handshake; 0 means the nats.go default
	// (2 s). Connect is also bounded by its ctx.
	Timeout time.Duration

	// StopOnRefusal ends a ConnectRetry at the first refusal of the
	// credentials (see Refused) instead of retrying it until the timeout: a
	// person at a command line wants to hear at once that a key is wrong,
	// while a daemon keeps waiting out a server whose accounts change.
	StopOnRefusal bool
}

// Validate reports, wrapped in ErrInvalidConfig, why c cannot work. It also
// checks that the named files exist, so a typo fails before any dialling.
func (c *ClientConfig) Validate() error {
	var errs []error
	var auth []string
	for _, a := range []struct{ name, val string }{
		{"Creds", c.Creds}, {"NKeySeedFile", c.NKeySeedFile}, {"Token", c.Token}, {"User", c.User},
	} {
		if a.val != "" {
			auth = append(auth, a.name)
		}
	}
	if len(auth) > 1 {
		errs = append(errs, invalid("choose one way to authenticate, got %s", strings.Join(auth, " and ")))
	}
	if c.Password != "" && c.User == "" {
		errs = append(errs, invalid("Password without User"))
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, invalid("CertFile and KeyFile go together"))
	}
	if p := c.InboxPrefix; p != "" && (strings.ContainsAny(p, "*> \t") || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".")) {
		errs = append(errs, invalid("InboxPrefix %q must be a plain subject prefix (no wildcards, spaces or edge dots)", p))
	}
	if c.ReconnectWait < 0 || c.Timeout < 0 {
		errs = append(errs, invalid("negative ReconnectWait or Timeout"))
	}
	for _, f := range []struct{ name, path string }{
		{"Creds", c.Creds}, {"NKeySeedFile", c.NKeySeedFile}, {"CAFile", c.CAFile},
		{"CertFile", c.CertFile}, {"KeyFile", c.KeyFile},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			errs = append(errs, invalid("%s: %v", f.name, err))
		}
	}
	return errors.Join(errs...)
}

// servers is the comma-separated server list nats.Connect expects.
func (c *ClientConfig) servers() string {
	return cmp.Or(strings.Join(splitList(c.URLs), ","), nats.DefaultURL)
}

// Options returns the nats.go options Connect uses, for callers that need
// to dial themselves.
func (c *ClientConfig) Options() ([]nats.Option, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	opts := []nats.Option{
		nats.Name(c.Name),
		// Never give up: a worker outlives a NATS restart. Jitter keeps a
		// fleet from reconnecting in lockstep.
		nats.MaxReconnects(-1),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
	}
	if c.ReconnectWait > 0 {
		opts = append(opts, nats.ReconnectWait(c.ReconnectWait))
	}
	if c.Timeout > 0 {
		opts = append(opts, nats.Timeout(c.Timeout))
	}
	switch {
	case c.Creds != "":
		opts = append(opts, nats.UserCredentials(c.Creds))
	case c.NKeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(c.NKeySeedFile)
		if err != nil {
			return nil, invalid("NKeySeedFile: %v", err)
		}
		opts = append(opts, o)
	case c.Token != "":
		opts = append(opts, nats.Token(c.Token))
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.CAFile != "" || c.CertFile != "" {
		tc, err := clientTLS(c.CAFile, c.CertFile, c.KeyFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Secure(tc))
	}
	if c.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(c.InboxPrefix))
	}
	return append(opts, connHandlers(c.Logger, c.Name)...), nil
}

// Connect dials the configured servers, trying each once, and returns a
// connection that reconnects forever with jitter and logs its async errors,
// disconnects and reconnects. opts are applied last and may override any of
// this. ctx bounds the dial; a connection that completes after ctx is done
// is closed.
func Connect(ctx context.Context, cfg ClientConfig, opts ...nats.Option) (*nats.Conn, error) {
	base, err := cfg.Options()
	if err != nil {
		return nil, err
	}
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	servers := cfg.servers()
	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := nats.Connect(servers, append(base, opts...)...)
		done <- result{nc, err}
	}()
	select {
	case r := <-done:
		if Refused(r.err) {
			return nil, &RefusedError{Servers: redact(servers), Offered: cfg.offered(), Err: r.err}
		}
		if r.err != nil {
			return nil, fmt.Errorf("broker: connect %s: %w", redact(servers), r.err)
		}
		return r.nc, nil
	case <-ctx.Done():
		go func() {
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, fmt.Errorf("broker: connect %s: %w", redact(servers), context.Cause(ctx))
	}
}

// redact hides passwords embedded in URLs (nats://user:pass@host) so
// errors can be logged.
func redact(servers string) string {
	parts := strings.Split(servers, ",")
	for i, p := range parts {
		at := strings.LastIndex(p, "@")
		scheme := strings.Index(p, "://")
		if at < 0 || scheme < 0 || at < scheme {
			continue
		}
		parts[i] = p[:scheme+3] + "***" + p[at:]
	}
	return strings.Join(parts, ",")
}

// RefusedError is a server's refusal of a connection's credentials (see
// Refused), saying which credentials were offered: what a person needs to
// know to fix it.
type RefusedError struct {
	Servers string // the servers dialled, passwords hidden
	Offered string // "no credentials", "the credentials in FILE", ...
	Err     error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s refused a connection with %s (%v)", e.Servers, e.Offered, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// offered names the credentials c gives the server.
func (c *ClientConfig) offered() string {
	switch {
	case c.Creds != "":
		return "the credentials in " + c.Creds
	case c.NKeySeedFile != "":
		return "the nkey in " + c.NKeySeedFile
	case c.Token != "":
		return "a token (--nats-token)"
	case c.User != "":
		return "user " + c.User + " (--nats-user)"
	}
	return "no credentials"
}
