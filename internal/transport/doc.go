// Package transport is how Formica's processes talk.
//
// It defines Transport: publish, multi-reply requests (a worker answers a
// spawn with progress heartbeats, then the result) and bounded serving. The
// package owns the interface so the coordinator and the worker depend on it,
// not on NATS; natstransport implements it, and the transporttest suite
// holds every implementation to the same contract. What travels, the
// message (wire.Msg) and its error replies (wire.ErrorMsg, one code list),
// belongs to the protocol, package wire.
package transport
