package broker

import (
	"flag"
	"strings"
)

// RegisterFlags binds the client flags to c, shared by every Formica
// program that connects to external NATS. Current field values are the
// defaults, so a program can prefill c (from its environment, say) first.
// Prefer --nats-creds or --nats-nkey to secrets on the command line, which
// other local users can read.
func (c *ClientConfig) RegisterFlags(fs *flag.FlagSet) {
	fs.Var(&listValue{list: &c.URLs}, "nats", "NATS server `URL[,URL...]`; give every cluster node")
	fs.StringVar(&c.Creds, "nats-creds", c.Creds, "NATS credentials `file` (JWT and nkey seed)")
	fs.StringVar(&c.NKeySeedFile, "nats-nkey", c.NKeySeedFile, "NATS nkey seed `file`")
	fs.StringVar(&c.Token, "nats-token", c.Token, "NATS auth `token`")
	fs.StringVar(&c.User, "nats-user", c.User, "NATS `user` (with --nats-password)")
	fs.StringVar(&c.Password, "nats-password", c.Password, "NATS `password`")
	fs.StringVar(&c.CAFile, "nats-ca", c.CAFile, "CA `file` to verify the NATS server (enables TLS)")
	fs.StringVar(&c.CertFile, "nats-cert", c.CertFile, "client certificate `file` for NATS mutual TLS")
	fs.StringVar(&c.KeyFile, "nats-key", c.KeyFile, "client key `file` for NATS mutual TLS")
}

// RegisterServerFlags binds the embedded-server flags to c. Current field
// values are the defaults, but for the cluster flags: any of them creates
// c.Cluster if needed, and --nats-routes adds to its Routes.
func (c *ServerConfig) RegisterServerFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "`dir` for the JetStream store")
	fs.StringVar(&c.Listen, "nats-listen", c.Listen, "NATS client listen `addr` (host:port); empty: in-process clients only")
	fs.BoolVar(&c.AllowRemote, "nats-allow-remote", c.AllowRemote, "allow NATS listen addresses other than loopback")
	fs.StringVar(&c.Monitor, "nats-monitor", c.Monitor, "NATS HTTP monitoring `addr` (host:port: /varz, /jsz, /healthz for the NATS Prometheus exporter); empty: off")
	fs.StringVar(&c.ServerName, "nats-server-name", c.ServerName, "NATS server `name`; stable and unique per cluster node")
	cluster := func() *ClusterConfig {
		if c.Cluster == nil {
			c.Cluster = &ClusterConfig{}
		}
		return c.Cluster
	}
	fs.Func("nats-cluster-name", "NATS cluster `name`; joins a cluster", func(v string) error {
		cluster().Name = v
		return nil
	})
	fs.Func("nats-cluster-listen", "NATS cluster route listen `addr` (host:port)", func(v string) error {
		cluster().Listen = v
		return nil
	})
	fs.Func("nats-routes", "NATS cluster routes `URL[,URL...]` (every node, self included is fine)", func(v string) error {
		cluster().Routes = append(cluster().Routes, splitList([]string{v})...)
		return nil
	})
}

// listValue is a repeatable, comma-separated list flag. The first Set
// replaces the default; later ones append.
type listValue struct {
	list *[]string
	set  bool
}

func (v *listValue) String() string {
	if v == nil || v.list == nil {
		return ""
	}
	return strings.Join(*v.list, ",")
}

func (v *listValue) Set(s string) error {
	if !v.set {
		*v.list, v.set = nil, true
	}
	*v.list = append(*v.list, splitList([]string{s})...)
	return nil
}
