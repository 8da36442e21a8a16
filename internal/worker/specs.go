package worker

import (
	"errors"
	"sync"

	"github.com/formica-run/formica/internal/wire"
)

// maxSpecs bounds the specs a worker keeps; past it the oldest goes, and a
// placement naming it is answered ExecSpecMissing, which costs its
// coordinator one more request with the spec.
const maxSpecs = 1024

// errSpecMissing: the request names a spec by a hash this worker holds none of.
var errSpecMissing = errors.New("spec not held")

// specs keeps the thread specs placements sent, by content hash (see
// wire.ThreadSpec), shared read-only by every thread made from one.
type specs struct {
	mu    sync.Mutex
	byKey map[string]*wire.ThreadSpec
	order []string // a ring: the oldest key at next once full
	next  int
}

// complete gives req.Thread, in place, the spec req names: the request's
// own, after checking that it hashes to its name and keeping it, or the one
// held by that name (errSpecMissing if none). A request without a hash
// carries its whole thread.
func (s *specs) complete(req *wire.ExecRequest) error {
	if req.SpecHash == "" {
		return nil
	}
	if req.Spec == nil {
		s.mu.Lock()
		ts := s.byKey[req.SpecHash]
		s.mu.Unlock()
		if ts == nil {
			return errSpecMissing
		}
		wire.SetSpec(&req.Thread, ts)
		return nil
	}
	if wire.SpecHash(req.Spec) != req.SpecHash {
		return &wire.Error{Code: wire.CodeBadRequest, Message: "the spec does not match its hash"}
	}
	ts := new(wire.ThreadSpec)
	if err := wire.DecodeAs(req.Spec, wire.TypeThreadSpec, ts); err != nil {
		return err
	}
	s.mu.Lock()
	if held := s.byKey[req.SpecHash]; held != nil {
		ts = held
	} else {
		s.putLocked(req.SpecHash, ts)
	}
	s.mu.Unlock()
	wire.SetSpec(&req.Thread, ts)
	return nil
}

func (s *specs) putLocked(key string, ts *wire.ThreadSpec) {
	if s.byKey == nil {
		s.byKey = make(map[string]*wire.ThreadSpec)
	}
	if len(s.order) < maxSpecs {
		s.order = append(s.order, key)
	} else {
		delete(s.byKey, s.order[s.next])
		s.order[s.next] = key
		s.next = (s.next + 1) % maxSpecs
	}
	s.byKey[key] = ts
}
