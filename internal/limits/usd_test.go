package limits

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"sync"
	"testing"
)

const cent = 10_000 // micro-dollars

// TestUSDReservation: each renewal reserves its call's estimated cost
// whole at every node up to the run's; a call that does not fit beside the
// calls in flight is refused without spending the budget, one that does
// not fit beside what is used spends it, and settling trades the
// reservation for the real cost.
func TestUSDReservation(t *testing.T) {
	tree := NewTree(Budget{USD: 1.00}, nil)
	root := tree.Root()
	var leases []*Lease
	for i := range 9 {
		l := root.Lease()
		g := l.Renew(Spend{}, 11*cent)
		if g.Spent != nil || g.USD != 11*cent {
			t.Fatalf("lease %d: grant %+v, want 11 cents", i, g)
		}
		if g.Tokens != Unlimited {
			t.Fatalf("lease %d: tokens %d, want unlimited", i, g.Tokens)
		}
		leases = append(leases, l)
	}
	// 99 cents are reserved: an 11-cent call does not fit, for now.
	g := root.Lease().Renew(Spend{}, 11*cent)
	if g.Spent == nil || g.Spent.Kind != KindUSD || g.Spent.Used != 99*cent || g.Spent.Limit != 100*cent {
		t.Fatalf("tenth call: %+v, want refused with 99 cents held", g.Spent)
	}
	if root.Spent() != nil {
		t.Fatal("a refusal for calls in flight marked the budget spent")
	}
	// A call that fits what is left still goes.
	small := root.Lease()
	if g := small.Renew(Spend{}, cent); g.Spent != nil || g.USD != cent {
		t.Fatalf("one-cent call: %+v", g)
	}
	small.Close(Spend{Micros: cent / 2})
	// The calls end, cheaper than estimated: their reservation is freed.
	for _, l := range leases {
		l.Close(Spend{In: 100, Out: 10, Micros: 10 * cent})
	}
	u := root.Use()[KindUSD]
	if u.Used != 90*cent+cent/2 || u.Limit != 100*cent {
		t.Fatalf("use %+v, want 90.5 cents of 100", u)
	}
	if root.reserved[iUSD] != 0 {
		t.Fatalf("%d micro-dollars still reserved", root.reserved[iUSD])
	}
	// 9.5 cents left: an 11-cent call can never fit, and spends the budget.
	g = root.Lease().Renew(Spend{}, 11*cent)
	if g.Spent == nil || g.Spent.Kind != KindUSD {
		t.Fatalf("last call: %+v", g)
	}
	spent := root.Spent()
	if spent == nil || spent.Detail() != "budget exhausted (usd): $0.905/$1.00" {
		t.Fatalf("spent %+v, detail %q", spent, spent.Detail())
	}
	if err := root.Spawn(); err != nil {
		t.Fatalf("spawn refused before the money is used: %v", err)
	}
}

// TestUSDNested: a helper's usd budget reserves inside its parent's, and
// spends only its own subtree.
func TestUSDNested(t *testing.T) {
	tree := NewTree(Budget{USD: 1, Tokens: 1_000_000}, nil)
	root := tree.Root()
	helper := root.Child(Budget{USD: 0.25})
	l := helper.Lease()
	for i, s := range []Spend{{}, {In: 10, Micros: 10 * cent}} {
		g := l.Renew(s, 10*cent)
		if g.Spent != nil || g.USD != 10*cent || g.Tokens <= 0 || g.Tokens >= Unlimited {
			t.Fatalf("call %d: %+v", i, g)
		}
	}
	if root.reserved[iUSD] != 10*cent || helper.reserved[iUSD] != 10*cent {
		t.Fatalf("reserved root %d, helper %d; want 10 cents each", root.reserved[iUSD], helper.reserved[iUSD])
	}
	// 20 cents used once this settles: 10 more would pass 25 cents.
	g := l.Renew(Spend{Micros: 10 * cent}, 10*cent)
	if g.Spent == nil || g.Spent.Kind != KindUSD || g.Spent.Limit != 25*cent {
		t.Fatalf("third call: %+v, want the helper's budget spent", g)
	}
	if helper.Spent() == nil || root.Spent() != nil {
		t.Fatalf("helper spent %v, root spent %v: want the helper's alone", helper.Spent(), root.Spent())
	}
	if u := root.Use()[KindUSD]; u.Used != 20*cent {
		t.Fatalf("root use %+v, want 20 cents", u)
	}
	// The parent goes on with what the run has left.
	if g := root.Lease().Renew(Spend{}, 50*cent); g.Spent != nil || g.USD != 50*cent {
		t.Fatalf("root call: %+v", g)
	}
}

// TestUSDOvershoot: a call that costs more than its estimate spends past
// the budget; the record shows it, and nothing more starts.
func TestUSDOvershoot(t *testing.T) {
	tree := NewTree(Budget{USD: 1}, nil)
	l := tree.Root().Lease()
	l.Renew(Spend{Micros: 0}, 90*cent)
	g := l.Renew(Spend{Micros: 102 * cent}, cent)
	if g.Spent == nil || g.Spent.Kind != KindUSD {
		t.Fatalf("after overshoot: %+v", g)
	}
	if d := tree.Root().Spent().Detail(); d != "budget exhausted (usd): $1.02/$1.00" {
		t.Fatalf("detail %q", d)
	}
	if err := tree.Root().Spawn(); err == nil {
		t.Fatal("spawn admitted with the money spent")
	}
	b, err := json.Marshal(tree.Root().Use())
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"usd":{"used":1.02,"limit":1}}` {
		t.Fatalf("use in JSON: %s", b)
	}
	var back Use
	if err := json.Unmarshal(b, &back); err != nil || back[KindUSD] != (Amount{Used: 102 * cent, Limit: 100 * cent}) {
		t.Fatalf("use read back: %v, %v", back, err)
	}
}

// TestUSDAccountOnce: a thread placed again settles its journaled cost
// less what its renewals settled, and a reused helper's cost is charged.
func TestUSDAccountOnce(t *testing.T) {
	tree := NewTree(Budget{USD: 10}, nil)
	root := tree.Root()
	l := root.Lease()
	l.Renew(Spend{}, 30*cent)
	l.Renew(Spend{Micros: 25 * cent}, 30*cent)
	l.Account(Spend{Micros: 40 * cent}) // the journal: 40 cents in all
	if u := root.Use()[KindUSD].Used; u != 40*cent || root.reserved[iUSD] != 0 {
		t.Fatalf("used %d, reserved %d", u, root.reserved[iUSD])
	}
	l.Close(Spend{Micros: 40 * cent})
	root.Child(Budget{USD: 0.01}).Charge(Spend{Micros: 60 * cent}, 1)
	if u := root.Use()[KindUSD].Used; u != 100*cent {
		t.Fatalf("used %d after charge, want a dollar", u)
	}
}

// TestUSDFanOutMeters: 100 threads at once, each making one call whose
// estimate is its cost, against a dollar: the calls that run cost at most
// the budget and at least the budget less one call.
func TestUSDFanOutMeters(t *testing.T) {
	const call = 11 * cent
	tree := NewTree(Budget{USD: 1}, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ran, refused := 0, 0
	for range 100 {
		wg.Go(func() {
			l := tree.Root().Lease()
			m := NewMeter(l.Renew(Spend{}, 0), func(_ context.Context, s Spend, need int64) (Grant, error) { return l.Renew(s, need), nil }, nil)
			err := m.Before(context.Background(), Estimate{Micros: call})
			var own Spend
			if err == nil {
				m.After(Spend{In: 1000, Out: 100, Micros: call})
				own.Micros = call
			}
			l.Close(own)
			mu.Lock()
			defer mu.Unlock()
			var ex *Exhausted
			switch {
			case err == nil:
				ran++
			case errors.As(err, &ex) && ex.Kind == KindUSD:
				refused++
			default:
				t.Errorf("before: %v", err)
			}
		})
	}
	wg.Wait()
	used := tree.Root().Use()[KindUSD].Used
	if used != int64(ran)*call || used > 100*cent || used <= 100*cent-call {
		t.Fatalf("%d calls ran (%d refused), used %d", ran, refused, used)
	}
}

// TestMeterUSD: a meter reserves each call's estimate, renewing for the
// next; a model with no price is refused under a usd budget only.
func TestMeterUSD(t *testing.T) {
	tree := NewTree(Budget{USD: 0.5}, nil)
	l := tree.Root().Lease()
	renewals := 0
	m := NewMeter(l.Renew(Spend{}, 0), func(_ context.Context, s Spend, need int64) (Grant, error) {
		renewals++
		return l.Renew(s, need), nil
	}, nil)
	ctx := context.Background()
	for i := range 4 {
		if err := m.Before(ctx, Estimate{Micros: 12 * cent}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		m.After(Spend{Micros: 10 * cent})
	}
	if renewals != 4 {
		t.Fatalf("%d renewals for 4 calls", renewals)
	}
	// 40 cents used: 12 more cannot fit.
	var ex *Exhausted
	if err := m.Before(ctx, Estimate{Micros: 12 * cent}); !errors.As(err, &ex) || ex.Kind != KindUSD {
		t.Fatalf("fifth call: %v", err)
	}
	if err := m.Before(ctx, Estimate{Micros: cent}); !errors.As(err, &ex) {
		t.Fatalf("after the budget is spent: %v", err)
	}

	m2 := tree.Root().Lease()
	meter2 := NewMeter(m2.Renew(Spend{}, 0), func(_ context.Context, s Spend, need int64) (Grant, error) { return m2.Renew(s, need), nil }, nil)
	if err := meter2.Before(ctx, Estimate{Unpriced: true, Model: "sim"}); !errors.Is(err, ErrUnpriced) {
		t.Fatalf("unpriced under a usd budget: %v", err)
	}
	free := NewTree(Budget{Tokens: 1000}, nil).Root().Lease()
	meter3 := NewMeter(free.Renew(Spend{}, 0), func(_ context.Context, s Spend, need int64) (Grant, error) { return free.Renew(s, need), nil }, nil)
	if err := meter3.Before(ctx, Estimate{Unpriced: true, Model: "sim"}); err != nil {
		t.Fatalf("unpriced without a usd budget: %v", err)
	}
	meter3.Park()
	if err := meter3.Before(ctx, Estimate{Unpriced: true, Model: "sim"}); err != nil {
		t.Fatalf("unpriced after parking, without a usd budget: %v", err)
	}
}

func TestUSDAmounts(t *testing.T) {
	for micros, want := range map[int64]string{0: "$0.00", 1_020_000: "$1.02", 1_000_000: "$1.00", 12_300: "$0.0123", 4: "$0.00", 905_000: "$0.905", 990_009: "$0.99"} {
		if got := FormatUSD(micros); got != want {
			t.Errorf("FormatUSD(%d) = %q, want %q", micros, got, want)
		}
	}
	if got := (Budget{USD: 1e-9}).Micros(); got != 1 {
		t.Errorf("a tiny budget is %d micro-dollars, want 1", got)
	}
	for _, b := range []Budget{{USD: -1}, {USD: math.NaN()}, {USD: math.Inf(1)}} {
		if err := b.Validate(); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%v: %v", b.USD, err)
		}
	}
	if got := (Budget{USD: 1, Tokens: 5}).Override(Budget{USD: 2}); got.USD != 2 || got.Tokens != 5 {
		t.Errorf("override: %+v", got)
	}
}
