package limits

import (
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

func mustNew(t *testing.T, cfg Config) *Ledger {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestDepthIsInclusiveAndCheckedFirst(t *testing.T) {
	l := mustNew(t, Config{})
	s, err := l.Admit(4)
	if err != nil {
		t.Fatalf("depth 4 refused: %v", err)
	}
	s.Release()

	_, err = l.Admit(5)
	var r *Refusal
	if !errors.As(err, &r) || r.Reason != ReasonDepth {
		t.Fatalf("depth 5: got %v, want depth refusal", err)
	}
	if got := err.Error(); got != "Agent depth limit reached. Solve the task yourself." {
		t.Fatalf("depth text = %q", got)
	}

	// With every thread slot taken, a too-deep spawn still reports depth.
	full := mustNew(t, Config{MaxThreads: 1})
	if _, err := full.Admit(1); err != nil {
		t.Fatal(err)
	}
	if _, err := full.Admit(9); !errors.As(err, &r) || r.Reason != ReasonDepth {
		t.Fatalf("full and too deep: got %v, want depth first", err)
	}
}

func TestThreadLimitAndSlotReuse(t *testing.T) {
	l := mustNew(t, Config{})
	var slots []*Slot
	for i := range 16 {
		s, err := l.Admit(1)
		if err != nil {
			t.Fatalf("helper %d refused: %v", i+1, err)
		}
		slots = append(slots, s)
	}
	_, err := l.Admit(1)
	if err == nil || err.Error() != "Agent thread limit reached. Solve the task yourself." {
		t.Fatalf("17th: got %v", err)
	}
	for _, s := range slots {
		s.Release()
		s.Release() // twice is harmless
	}
	if got := l.Stats().Live; got != 0 {
		t.Fatalf("live after release = %d", got)
	}
	s, err := l.Admit(1)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	s.Release()
	st := l.Stats()
	if st.RefusedThreads != 1 || st.Admitted != 17 || st.Peak != 16 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestConcurrentStormNeverExceedsLimit(t *testing.T) {
	const limit, attempts = 16, 1000
	l := mustNew(t, Config{MaxThreads: limit})
	var alive, maxSeen atomic.Int64
	var wg sync.WaitGroup
	for range attempts {
		wg.Go(func() {
			s, err := l.Admit(1)
			if err != nil {
				return
			}
			n := alive.Add(1)
			for {
				m := maxSeen.Load()
				if n <= m || maxSeen.CompareAndSwap(m, n) {
					break
				}
			}
			alive.Add(-1)
			s.Release()
		})
	}
	wg.Wait()
	if m := maxSeen.Load(); m > limit {
		t.Fatalf("saw %d alive, limit %d", m, limit)
	}
	st := l.Stats()
	if st.Live != 0 || st.Peak > limit || st.Admitted+st.RefusedThreads != attempts {
		t.Fatalf("stats = %+v", st)
	}
}

func TestBadConfig(t *testing.T) {
	if _, err := New(Config{MaxDepth: -1}); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("got %v", err)
	}
}

func BenchmarkAdmitRelease(b *testing.B) {
	l, _ := New(Config{MaxThreads: 1 << 20})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s, _ := l.Admit(1)
			s.Release()
		}
	})
}

// A grant reads back as it was written, with or without a spent budget.
func TestGrantRoundTrip(t *testing.T) {
	for _, g := range []Grant{{}, UnlimitedGrant,
		{Tokens: 10, InputTokens: 4, OutputTokens: 6, Remaining: time.Minute, Spent: &Exhausted{Kind: KindTokens, Used: 11, Limit: 10}}} {
		data, err := msgpack.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		var got Grant
		if err := msgpack.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, g) {
			t.Errorf("got %+v, want %+v", got, g)
		}
	}
}

// UnlimitedGrant bounds nothing.
var UnlimitedGrant = Grant{Tokens: Unlimited, InputTokens: Unlimited, OutputTokens: Unlimited, USD: Unlimited}
