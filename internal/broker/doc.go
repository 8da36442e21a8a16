// Package broker gets Formica's processes a NATS connection.
//
// The coordinator embeds a NATS server (StartServer) with JetStream on disk,
// or all processes connect to an external cluster (Connect). The client CLI
// starts an embedded server with no TCP listener for one-shot runs, so a run
// on a laptop opens no port.
//
// The package encodes the lessons in docs/nats.md so callers need not relearn
// them: the embedded server never installs signal handlers (NoSigs), its logs
// go through slog, clustered nodes always listen, every wait is bounded,
// asynchronous client errors (slow consumers, permission violations, which
// otherwise look like timeouts) are logged, and Drain waits until the
// connection is really closed.
//
// Test servers and clusters live in the brokertest subpackage.
package broker
