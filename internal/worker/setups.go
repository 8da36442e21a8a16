package worker

import (
	"errors"
	"sync"

	"github.com/formica-run/formica/internal/wire"
)

// maxSetups bounds the setups a worker keeps; past it the oldest
// goes, and a placement naming it is answered ExecSetupMissing, which
// costs its coordinator one more request with the setup.
const maxSetups = 1024

// errSetupMissing: the request names a setup by a hash this worker
// holds none of.
var errSetupMissing = errors.New("setup not held")

// setups keeps the thread setups placements sent, by content hash
// (see wire.ThreadSetup), shared read-only by every thread made from one.
type setups struct {
	mu    sync.Mutex
	byKey map[string]*wire.ThreadSetup
	order []string // a ring: the oldest key at next once full
	next  int
}

// complete gives req.Thread, in place, the setup req names: the request's
// own, after checking that it hashes to its name and keeping it, or the one
// held by that name (errSetupMissing if none). A request without a hash
// carries its whole thread.
func (s *setups) complete(req *wire.ExecRequest) error {
	if req.SetupHash == "" {
		return nil
	}
	if req.Setup == nil {
		s.mu.Lock()
		ts := s.byKey[req.SetupHash]
		s.mu.Unlock()
		if ts == nil {
			return errSetupMissing
		}
		wire.SetSetup(&req.Thread, ts)
		return nil
	}
	if wire.SetupHash(req.Setup) != req.SetupHash {
		return &wire.Error{Code: wire.CodeBadRequest, Message: "the setup does not match its hash"}
	}
	ts := new(wire.ThreadSetup)
	if err := wire.DecodeAs(req.Setup, wire.TypeThreadSetup, ts); err != nil {
		return err
	}
	s.mu.Lock()
	if held := s.byKey[req.SetupHash]; held != nil {
		ts = held
	} else {
		s.putLocked(req.SetupHash, ts)
	}
	s.mu.Unlock()
	wire.SetSetup(&req.Thread, ts)
	return nil
}

func (s *setups) putLocked(key string, ts *wire.ThreadSetup) {
	if s.byKey == nil {
		s.byKey = make(map[string]*wire.ThreadSetup)
	}
	if len(s.order) < maxSetups {
		s.order = append(s.order, key)
	} else {
		delete(s.byKey, s.order[s.next])
		s.order[s.next] = key
		s.next = (s.next + 1) % maxSetups
	}
	s.byKey[key] = ts
}
