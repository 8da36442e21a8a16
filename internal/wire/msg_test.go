package wire

import (
	"errors"
	"testing"
)

// An error reply keeps its code across the wire: the receiver matches it
// with errors.Is against the same sentinels the sender used.
func TestErrorReplyMatchesAcrossTheWire(t *testing.T) {
	for _, sent := range []error{ErrNotFound, ErrFenced, ErrForbidden, ErrConflict, ErrOverloaded, ErrClosed, ErrBadMessage} {
		got := MsgError(ErrorReply(&Error{Code: sent.(*Error).Code, Message: "detail"}))
		if !errors.Is(got, sent) {
			t.Errorf("%v: received %v, which does not match", sent, got)
		}
		if errors.Is(got, ErrBusy) {
			t.Errorf("%v: received %v matches busy", sent, got)
		}
	}
	if got := MsgError(ErrorReply(errors.New("boom"))); got == nil || got.Error() != "internal: boom" {
		t.Errorf("plain error arrives as %v, want internal: boom", got)
	}
	if MsgError(Message(TypeOK, struct{}{})) != nil {
		t.Error("an ok reply reads as an error")
	}
}
