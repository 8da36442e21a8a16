package coordinator

import (
	"errors"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/wire"
)

// TestPlacementCheck: a check is answered ok only for the current placement
// (its worker, its token); an ok answer keeps the placement from being
// given up for silence within the loss window that follows, and once it is
// given up a check is fenced.
func TestPlacementCheck(t *testing.T) {
	r := newRun("r1", nil, nil, "")
	th := &threadRec{}
	r.threads["t1"] = th
	tok := r.place(th, "w1")
	const idle = time.Second
	t0 := time.Now()

	for _, tt := range []struct{ name, thread, worker, token string }{
		{"another worker", "t1", "w2", tok},
		{"another token", "t1", "w1", "forged"},
		{"no token", "t1", "w1", ""},
	} {
		if err := r.vouch(tt.thread, tt.worker, tt.token, t0); !errors.Is(err, wire.ErrFenced) {
			t.Errorf("%s: %v, want fenced", tt.name, err)
		}
	}
	if err := r.vouch("t2", "w1", tok, t0); !errors.Is(err, wire.ErrNotFound) {
		t.Errorf("unknown thread: %v, want not found", err)
	}
	if _, lapsed := r.lapse(th, idle, t0); !lapsed {
		t.Fatal("a silent placement no check vouched for did not lapse")
	}
	if err := r.vouch("t1", "w1", tok, t0); !errors.Is(err, wire.ErrFenced) {
		t.Errorf("check of a lapsed placement: %v, want fenced", err)
	}

	tok = r.place(th, "w1")
	if err := r.vouch("t1", "w1", tok, t0); err != nil {
		t.Fatalf("check of the current placement: %v", err)
	}
	if v, lapsed := r.lapse(th, idle, t0.Add(idle/2)); lapsed || !v.Equal(t0) {
		t.Errorf("silent for half a window after a check: lapsed %v (vouched %v)", lapsed, v)
	}
	if _, lapsed := r.lapse(th, idle, t0.Add(idle)); !lapsed {
		t.Error("silent for a whole window after a check: did not lapse")
	}
	if err := r.vouch("t1", "w1", tok, t0.Add(idle)); !errors.Is(err, wire.ErrFenced) {
		t.Errorf("check after the placement lapsed: %v, want fenced", err)
	}

	// A check vouches for its placement only, not for the next one.
	tok = r.place(th, "w1")
	if err := r.vouch("t1", "w1", tok, t0); err != nil {
		t.Fatalf("check of the current placement: %v", err)
	}
	r.place(th, "w2")
	if _, lapsed := r.lapse(th, idle, t0.Add(idle/2)); !lapsed {
		t.Error("a placement lived on a check of the one before it")
	}
}
