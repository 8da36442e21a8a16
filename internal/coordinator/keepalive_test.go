package coordinator

import (
	"sync"
	"testing"

	"github.com/formica-run/formica/internal/wire"
)

// sentReplies records what a request's requester was sent.
type sentReplies struct {
	mu   sync.Mutex
	msgs []wire.Msg
}

func (s *sentReplies) Reply(m wire.Msg) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, m)
	return nil
}

func (s *sentReplies) NoReply() bool { return false }

// progress decodes the replies sent so far and forgets them.
func (s *sentReplies) progress(t *testing.T) []wire.Progress {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []wire.Progress
	for _, m := range s.msgs {
		var p wire.Progress
		if err := wire.DecodeAs(m.Data, wire.TypeProgress, &p); err != nil {
			t.Fatalf("keep-alive %s: %v", m.Type, err)
		}
		out = append(out, p)
	}
	s.msgs = nil
	return out
}

// TestKeepAliveNamesTheThreadOnceNamed: a request is kept alive with bare
// progress until it is named (a spawn once its helper is admitted), then
// with progress naming the thread, which a parent's worker journals; once
// removed it hears nothing more.
func TestKeepAliveNamesTheThreadOnceNamed(t *testing.T) {
	k := keepalive{repliers: map[*alivePing]struct{}{}}
	spawn, approval := &sentReplies{}, &sentReplies{}
	p := k.add(spawn, "")
	k.add(approval, "t1")

	k.ping()
	if got := spawn.progress(t); len(got) != 1 || got[0].ThreadID != "" {
		t.Errorf("spawn before admission heard %+v, want one bare progress", got)
	}
	if got := approval.progress(t); len(got) != 1 || got[0].ThreadID != "t1" {
		t.Errorf("approval heard %+v, want one progress naming t1", got)
	}

	k.name(p, "helper-1")
	k.ping()
	if got := spawn.progress(t); len(got) != 1 || got[0].ThreadID != "helper-1" {
		t.Errorf("admitted spawn heard %+v, want one progress naming its helper", got)
	}

	k.remove(p)
	k.ping()
	if got := spawn.progress(t); len(got) != 0 {
		t.Errorf("answered spawn heard %+v, want nothing", got)
	}
}
