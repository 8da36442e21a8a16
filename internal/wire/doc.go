// Package wire is what Formica's processes say to each other over NATS: the
// message bodies, their msgpack encoding inside a typed, versioned envelope,
// the subjects they travel on, and the error codes that cross the wire.
//
// A message of an unknown version or type, or one that does not decode, is an
// error value to answer with, never a panic.
package wire
