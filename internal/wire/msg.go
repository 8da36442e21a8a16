package wire

import "errors"

// Msg is one message as a transport moves it: a type (also sent as a header
// so receivers can route without decoding), headers, and an opaque body. The
// protocol owns it so that everything speaking the protocol, the transport
// included, shares one message and one error model.
type Msg struct {
	// Subject is where a served message arrived (set by the transport for
	// handlers, ignored on send): with per-sender subjects, it says who
	// sent it.
	Subject string
	Type    string
	Header  map[string]string
	Data    []byte
}

// Message encodes body as a transport message of type t.
func Message(t Type, body any) Msg {
	return Msg{Type: string(t), Data: MustEncode(t, body)}
}

// WithIDs adds the run and thread headers every message about a thread carries.
func WithIDs(m Msg, run, thread string) Msg {
	m.Header = map[string]string{HeaderRun: run, HeaderThread: thread}
	return m
}

// MayCarryRef says whether a message of type t may arrive with its body by
// reference (natstransport.Config.MayCarryRef): only the messages whose
// bodies grow with a task, a spec, a result or the thread events they
// carry (progress).
func MayCarryRef(t string) bool {
	switch Type(t) {
	case TypeExecRequest, TypeExecResult, TypeSpawnRequest, TypeSpawnResult, TypeApprovalRequest,
		TypeRunSubmit, TypeRunResult, TypeProgress:
		return true
	}
	return false
}

// ErrorMsg builds an error reply: type "error", the code in a header and
// the text as the body.
func ErrorMsg(code Code, text string) Msg {
	return Msg{Type: string(TypeError), Header: map[string]string{HeaderErrorCode: string(code)}, Data: []byte(text)}
}

// ErrorReply turns an error into an error reply, keeping its code when it is
// a wire error so errors.Is works on the far side.
func ErrorReply(err error) Msg {
	var we *Error
	if errors.As(err, &we) {
		return ErrorMsg(we.Code, we.Message)
	}
	return ErrorMsg(CodeInternal, err.Error())
}

// MsgError returns the *Error an error reply carries, or nil when m is not
// one: errors.Is matches it against this package's sentinels by code.
func MsgError(m Msg) error {
	if m.Type != string(TypeError) {
		return nil
	}
	return &Error{Code: Code(m.Header[HeaderErrorCode]), Message: string(m.Data)}
}
