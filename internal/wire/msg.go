package wire

import (
	"errors"

	"github.com/formica-run/formica/internal/actor"
)

// Message encodes body as a transport message of type t.
func Message(t Type, body any) actor.Msg {
	return actor.Msg{Type: string(t), Data: MustEncode(t, body)}
}

// WithIDs adds the run and thread headers every message about a thread carries.
func WithIDs(m actor.Msg, run, thread string) actor.Msg {
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

// ErrorReply turns an error into an error reply, keeping its code when it is
// a wire error so errors.Is works on the far side.
func ErrorReply(err error) actor.Msg {
	var we *Error
	if errors.As(err, &we) {
		return actor.ErrorMsg(string(we.Code), we.Message)
	}
	return actor.ErrorMsg(string(CodeInternal), err.Error())
}
