// Package wire is what Formica's processes say to each other over NATS: the
// message (Msg) and its bodies, their msgpack encoding inside a typed,
// versioned envelope, the subjects they travel on, and the one list of error
// codes that cross the wire (an error reply decodes to an *Error that
// errors.Is matches against this package's sentinels).
//
// It sits below the roles and the transport: it imports thread and spec
// data, never the agent loop, the tools or the transport.
//
// A message of an unknown version or type, or one that does not decode, is an
// error value to answer with, never a panic.
package wire
