package coordinatorcmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"github.com/formica-run/formica/internal/auth"
	"github.com/formica-run/formica/internal/broker"
	"github.com/formica-run/formica/internal/embedded"
)

// secureServer applies the embedded server's security: a TCP listener
// serves only clients with credentials the data dir's authority issued
// (created on first use for a loopback listener; a network listener needs
// it to exist already, made by `coordinator creds`), unless insecure, which
// only a loopback listener may be. In-process-only servers need nothing.
func secureServer(s *broker.ServerConfig, cfg *embedded.Config, insecure bool, cert, key, clientCA string, log *slog.Logger) error {
	if cert != "" || key != "" {
		if cert == "" || key == "" {
			return errors.New("--nats-tls-cert and --nats-tls-key go together")
		}
		tc, err := broker.ServerTLS(cert, key, clientCA)
		if err != nil {
			return err
		}
		s.TLS = tc
	} else if clientCA != "" {
		return errors.New("--nats-tls-client-ca needs --nats-tls-cert and --nats-tls-key")
	}
	if s.Listen == "" {
		return nil
	}
	remote := !loopback(s.Listen)
	if insecure {
		if remote {
			return fmt.Errorf("refusing to serve NATS on %s without authentication: --nats-insecure is for loopback listeners only", s.Listen)
		}
		log.Warn("NATS listener without authentication (--nats-insecure): any local process can act as a coordinator, a worker or a client", "listen", s.Listen)
		return nil
	}
	a, err := auth.Open(s.DataDir, !remote)
	if errors.Is(err, auth.ErrNoAuthority) {
		return fmt.Errorf("refusing to serve NATS on %s without credentials configured: issue them first with `coordinator creds --data-dir %s --role worker --id ID` (%w)", s.Listen, s.DataDir, err)
	}
	if err != nil {
		return err
	}
	cfg.Authority = a
	return nil
}

func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	// A host that is no IP parses to nil, which is not loopback.
	return err == nil && (host == "" || host == "localhost" || net.ParseIP(host).IsLoopback())
}

// creds is `coordinator creds`: it writes a standard NATS credentials file
// for a worker, a client or a viewer, signed by the authority under --data-dir
// (created when missing), which a running coordinator accepts at once.
// With --nats-server-conf it writes instead the configuration an external
// NATS server includes to trust that authority.
func creds(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("coordinator creds", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "formica-data", "the coordinator's data `dir`")
	roleName := fs.String("role", "", "worker, client, or viewer (an operator's read-only credential for dashboards and the nats CLI; or coordinator, for a second coordinator on the same NATS)")
	id := fs.String("id", "", "worker id (one word; the worker takes it as its --id), or the client's name (default client)")
	out := fs.String("out", "", "write to `file` (mode 0600) instead of stdout")
	serverConf := fs.Bool("nats-server-conf", false, "write the nats-server configuration that trusts these credentials (operator mode), for an external NATS cluster, instead of credentials")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *serverConf {
		if *roleName != "" || *id != "" {
			return errors.New("--nats-server-conf takes no --role or --id")
		}
		a, err := auth.Open(*dataDir, true)
		if err != nil {
			return err
		}
		return writeOut(*out, stdout, []byte(a.ServerConfig()))
	}
	role, err := auth.ParseRole(*roleName)
	if err != nil {
		return err
	}
	if *id == "" {
		if role == auth.Worker {
			return errors.New("--id is required for a worker")
		}
		*id = string(role)
	}
	a, err := auth.Open(*dataDir, true)
	if err != nil {
		return err
	}
	c, err := a.Issue(role, *id)
	if err != nil {
		return err
	}
	data, err := c.File()
	if err != nil {
		return err
	}
	return writeOut(*out, stdout, data)
}

// writeOut writes data to the file out (mode 0600), or to stdout.
func writeOut(out string, stdout io.Writer, data []byte) error {
	if out == "" {
		_, err := stdout.Write(data)
		return err
	}
	return os.WriteFile(out, data, 0o600)
}
