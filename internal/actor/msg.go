package actor

import "fmt"

// Msg is one message: a type (also sent as a header so receivers can route
// without decoding), headers, and an opaque body.
type Msg struct {
	// Subject is where a served message arrived (set by the transport for
	// handlers, ignored on send): with per-sender subjects, it says who
	// sent it.
	Subject string
	Type    string
	Header  map[string]string
	Data    []byte
}

// Message types the transport itself gives meaning to.
const (
	// TypeProgress marks a heartbeat on a request's reply inbox. It is the
	// only type a transport may drop, when the caller reads too slowly.
	TypeProgress = "progress"
	// TypeError marks an error reply; see ErrorMsg and MsgError.
	TypeError = "error"
)

// HeaderErrorCode carries an error reply's code so errors.Is works across
// the wire.
const HeaderErrorCode = "Formica-Error"

// Error codes with a sentinel on this side of the wire.
const (
	CodeOverloaded = "overloaded"
	CodeClosed     = "closed"
	CodeInternal   = "internal"
)

// ErrorMsg builds an error reply: Type "error", the code in a header and the
// text as the body.
func ErrorMsg(code, text string) Msg {
	return Msg{Type: TypeError, Header: map[string]string{HeaderErrorCode: code}, Data: []byte(text)}
}

// RemoteError is an error reply received from a peer.
type RemoteError struct {
	Code string
	Text string
}

func (e *RemoteError) Error() string {
	if e.Code == "" {
		return "remote error: " + e.Text
	}
	return fmt.Sprintf("remote error (%s): %s", e.Code, e.Text)
}

// Unwrap maps known codes to this package's sentinels.
func (e *RemoteError) Unwrap() error {
	switch e.Code {
	case CodeOverloaded:
		return ErrOverloaded
	case CodeClosed:
		return ErrClosed
	}
	return nil
}

// MsgError returns the error an error reply carries, or nil when m is not one.
func MsgError(m Msg) error {
	if m.Type != TypeError {
		return nil
	}
	return &RemoteError{Code: m.Header[HeaderErrorCode], Text: string(m.Data)}
}
