package wire

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Version is the protocol version this build speaks.
const Version = 1

// Type names a message.
type Type string

// Every message type.
const (
	TypeSpawnRequest     Type = "spawn.request"
	TypeSpawnResult      Type = "spawn.result"
	TypeExecRequest      Type = "exec.request"
	TypeExecAccepted     Type = "exec.accepted"
	TypeExecBusy         Type = "exec.busy"
	TypeProgress         Type = "progress"
	TypeExecResult       Type = "exec.result"
	TypeCancel           Type = "cancel"
	TypeApprovalRequest  Type = "approval.request"
	TypeApprovalDecision Type = "approval.decision"
	TypeApprovalDecide   Type = "approval.decide"
	TypeWorkerHeartbeat  Type = "worker.heartbeat"
	TypeCoordHeartbeat   Type = "coordinator.heartbeat"
	TypeRunSubmit        Type = "run.submit"
	TypeRunAccepted      Type = "run.accepted"
	TypeRunCancel        Type = "run.cancel"
	TypeRunResume        Type = "run.resume"
	TypeRunResult        Type = "run.result"
	TypeEvent            Type = "event"
	TypeWorkersList      Type = "workers.list"
	TypeAssetsList       Type = "assets.list"
	TypeBudgetRenew      Type = "budget.renew"
	TypeBudgetGrant      Type = "budget.grant"
	TypePlacementCheck   Type = "placement.check"
	TypeQuotaTake        Type = "quota.take"
	TypeQuotaWaiting     Type = "quota.waiting"
	TypeQuotaGrant       Type = "quota.grant"
	TypeQuotaDone        Type = "quota.done"
	TypeError            Type = "error"
	TypeOK               Type = "ok"
	TypeJournalEntry     Type = "journal.entry"
	TypeJournalRef       Type = "journal.ref"
	TypeJournalBatch     Type = "journal.batch"
)

// Envelope wraps every body with its type and the protocol version, so a
// receiver can refuse what it does not understand before decoding the body.
type Envelope struct {
	Type    Type               `msgpack:"t"`
	Version int                `msgpack:"v"`
	Body    msgpack.RawMessage `msgpack:"b"`
}

// outgoing is an Envelope as it is written, its body not yet encoded.
type outgoing struct {
	Type    Type `msgpack:"t"`
	Version int  `msgpack:"v"`
	Body    any  `msgpack:"b"`
}

// Encode wraps body in an envelope of type t. The type and version are
// written first, so a receiver can refuse a message before reading its
// body (see DecodeAs).
func Encode(t Type, body any) ([]byte, error) {
	data, err := msgpack.Marshal(outgoing{t, Version, body})
	if err != nil {
		return nil, fmt.Errorf("wire: encode %s: %w", t, err)
	}
	return data, nil
}

// MustEncode is Encode for bodies that cannot fail to encode (plain structs).
func MustEncode(t Type, body any) []byte {
	b, err := Encode(t, body)
	if err != nil {
		panic(err)
	}
	return b
}

// Decode reads an envelope and checks its version.
func Decode(data []byte) (Envelope, error) {
	var env Envelope
	if len(data) == 0 {
		return env, &Error{Code: CodeBadMessage, Message: "empty message"}
	}
	if err := Check(data); err != nil {
		return env, err
	}
	if err := msgpack.Unmarshal(data, &env); err != nil {
		return env, &Error{Code: CodeBadMessage, Message: "not a msgpack envelope: " + err.Error()}
	}
	if env.Version != Version {
		return env, &Error{Code: CodeUnsupportedVersion, Message: fmt.Sprintf("protocol version %d, this peer speaks %d", env.Version, Version)}
	}
	if env.Type == "" {
		return env, &Error{Code: CodeBadMessage, Message: "message has no type"}
	}
	return env, nil
}

// Into decodes the envelope's body into v, which must match the type want.
// The envelope must come from Decode, which bounded the whole message.
func (e Envelope) Into(want Type, v any) error {
	if e.Type != want {
		if e.Type == TypeError {
			var we Error
			if err := msgpack.Unmarshal(e.Body, &we); err == nil {
				return &we
			}
		}
		return &Error{Code: CodeUnknownType, Message: fmt.Sprintf("got %s, want %s", e.Type, want)}
	}
	dec := msgpack.NewDecoder(bytes.NewReader(e.Body))
	if err := dec.Decode(v); err != nil {
		return &Error{Code: CodeBadMessage, Message: fmt.Sprintf("bad %s body: %v", want, err)}
	}
	return nil
}

// DecodeAs decodes data as a message of type want into v, after Check has
// bounded what it may allocate. It reads the
// envelope and the body in one pass when, as Encode writes them, the type and
// version come before the body; any other key order still decodes.
func DecodeAs(data []byte, want Type, v any) error {
	if len(data) == 0 {
		return &Error{Code: CodeBadMessage, Message: "empty message"}
	}
	if err := Check(data); err != nil {
		return err
	}
	dec := msgpack.NewDecoder(bytes.NewReader(data))
	bad := func(err error) error {
		return &Error{Code: CodeBadMessage, Message: "not a msgpack envelope: " + err.Error()}
	}
	n, err := dec.DecodeMapLen()
	if err != nil {
		return bad(err)
	}
	env := Envelope{Version: -1}
	decoded := false
	for range n {
		key, err := dec.DecodeString()
		if err != nil {
			return bad(err)
		}
		switch key {
		case "t":
			var t string
			if t, err = dec.DecodeString(); err != nil {
				return bad(err)
			}
			env.Type = Type(t)
		case "v":
			if env.Version, err = dec.DecodeInt(); err != nil {
				return bad(err)
			}
		case "b":
			if env.Version == Version && env.Type == want {
				if err := dec.Decode(v); err != nil {
					return &Error{Code: CodeBadMessage, Message: fmt.Sprintf("bad %s body: %v", want, err)}
				}
				decoded = true
				continue
			}
			if env.Body, err = dec.DecodeRaw(); err != nil {
				return bad(err)
			}
		default:
			if err := dec.Skip(); err != nil {
				return bad(err)
			}
		}
	}
	if env.Version != Version {
		if env.Version == -1 {
			return &Error{Code: CodeBadMessage, Message: "message has no version"}
		}
		return &Error{Code: CodeUnsupportedVersion, Message: fmt.Sprintf("protocol version %d, this peer speaks %d", env.Version, Version)}
	}
	if env.Type == "" {
		return &Error{Code: CodeBadMessage, Message: "message has no type"}
	}
	if decoded {
		return nil
	}
	return env.Into(want, v)
}

// Code classifies an error that crosses the wire. This is the one list of
// them: whoever answers with an error, a handler or the transport, picks a
// code from it.
type Code string

// Error codes.
const (
	CodeBadMessage         Code = "bad_message"
	CodeUnsupportedVersion Code = "unsupported_version"
	CodeUnknownType        Code = "unknown_type"
	CodeNotFound           Code = "not_found"
	CodeBusy               Code = "busy"
	CodeDraining           Code = "draining"
	CodeInternal           Code = "internal"
	CodeBadRequest         Code = "bad_request"
	// CodeFenced refuses a message about a placement that is not (or no
	// longer) the thread's current one: its sender must stop the thread.
	CodeFenced Code = "fenced"
	// CodeForbidden refuses what the sender may not ask for.
	CodeForbidden Code = "forbidden"
	// CodeConflict refuses what the state no longer allows (an approval
	// already decided).
	CodeConflict Code = "conflict"
	// CodeOverloaded and CodeClosed are the transport's own refusals: the
	// responder's queue was full, or it is stopping.
	CodeOverloaded Code = "overloaded"
	CodeClosed     Code = "closed"
)

// Error is an error reply. errors.Is matches two Errors with the same code, so
// a receiver can test for ErrBadMessage and the like.
type Error struct {
	Code    Code   `msgpack:"code"`
	Message string `msgpack:"message"`
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

// Is matches by code.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// Sentinels for errors.Is.
var (
	ErrBadMessage         = &Error{Code: CodeBadMessage}
	ErrUnsupportedVersion = &Error{Code: CodeUnsupportedVersion}
	ErrUnknownType        = &Error{Code: CodeUnknownType}
	ErrNotFound           = &Error{Code: CodeNotFound}
	ErrBusy               = &Error{Code: CodeBusy}
	ErrFenced             = &Error{Code: CodeFenced}
	ErrForbidden          = &Error{Code: CodeForbidden}
	ErrConflict           = &Error{Code: CodeConflict}
	ErrOverloaded         = &Error{Code: CodeOverloaded}
	ErrClosed             = &Error{Code: CodeClosed}
)
