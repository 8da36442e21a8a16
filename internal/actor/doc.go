// Package actor is how Formica's processes and the things inside them talk.
//
// Between processes it defines Transport: publish, multi-reply requests (a
// worker answers a spawn with progress heartbeats, then the result) and
// bounded serving. The package owns the interface so the coordinator and the
// worker depend on it, not on NATS; natstransport implements it, and the
// transporttest suite holds every implementation to the same contract.
//
// Inside a process it offers lightweight actors (Engine): each actor is a
// Receiver with a bounded mailbox, addressed by a serialisable PID. An actor
// runs on a goroutine only while it has mail, so thousands of idle actors (one
// per hosted agent thread) cost a few hundred bytes each. Lifecycle travels
// through Receive like any other message: Started first, Stopped last.
package actor
