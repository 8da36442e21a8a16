package limits

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Unlimited is the grant of a kind no budget bounds.
const Unlimited = math.MaxInt64 / 4

// indexes of Node.used and Node.reserved: the kinds model calls spend.
const (
	iTokens = iota
	iInput
	iOutput
	iUSD // micro-dollars
	nTokenKinds
)

var tokenKinds = [nTokenKinds]Kind{KindTokens, KindInputTokens, KindOutputTokens, KindUSD}

// Tree is the budget accounting of one run, kept by whoever owns the run
// (the coordinator in a cluster): a node for the run's budget and one for
// each helper with a budget of its own, nested as the helpers are. One lock
// guards the tree; it is taken once per spawn and once per lease renewal,
// never per model call.
type Tree struct {
	mu   sync.Mutex
	now  func() time.Time
	root *Node
}

// Node is the budget of one subtree. Use, spawns and the first spent budget
// are counted at every node from a thread's up to the run's.
type Node struct {
	tree     *Tree
	parent   *Node
	limit    Budget
	start    time.Time
	used     [nTokenKinds]int64
	reserved [nTokenKinds]int64
	spawns   int
	spent    *Exhausted
}

// NewTree starts the accounting of a run whose budget is b, from now.
// now is the clock (nil: time.Now).
func NewTree(b Budget, now func() time.Time) *Tree {
	if now == nil {
		now = time.Now
	}
	t := &Tree{now: now}
	t.root = &Node{tree: t, limit: b, start: now()}
	return t
}

// Root is the run's node.
func (t *Tree) Root() *Node { return t.root }

// Child is the node of a helper spawned under n whose template gives it
// budget b: a new node inside n's, starting now, or n itself when b bounds
// nothing.
func (n *Node) Child(b Budget) *Node {
	if b.IsZero() {
		return n
	}
	return &Node{tree: n.tree, parent: n, limit: b, start: n.tree.now()}
}

// Spawn counts one helper started under n, or refuses it with a
// *Exhausted when a budget of n or of any node above it is spent (its
// spawns, its tokens or its time).
func (n *Node) Spawn() error {
	t := n.tree
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for m := n; m != nil; m = m.parent {
		if e := m.check(now, true); e != nil {
			m.mark(e)
			return e
		}
	}
	for m := n; m != nil; m = m.parent {
		m.spawns++
	}
	return nil
}

// check returns the first spent budget of m, counting spawns when spawn is set.
func (m *Node) check(now time.Time, spawn bool) *Exhausted {
	if d := m.limit.Duration; d > 0 {
		if el := now.Sub(m.start); el >= d {
			return &Exhausted{Kind: KindDuration, Used: int64(el), Limit: int64(d)}
		}
	}
	for i, lim := range m.tokenLimits() {
		if lim > 0 && m.used[i] >= lim {
			return &Exhausted{Kind: tokenKinds[i], Used: m.used[i], Limit: lim}
		}
	}
	if spawn && m.limit.Spawns > 0 && m.spawns >= m.limit.Spawns {
		return &Exhausted{Kind: KindSpawns, Used: int64(m.spawns), Limit: int64(m.limit.Spawns)}
	}
	return nil
}

func (m *Node) tokenLimits() [nTokenKinds]int64 {
	return [nTokenKinds]int64{m.limit.Tokens, m.limit.InputTokens, m.limit.OutputTokens, m.limit.Micros()}
}

func (m *Node) mark(e *Exhausted) {
	if m.spent == nil {
		m.spent = e
	}
}

// Ends is when n's own duration budget runs out (its start plus its
// duration), or the zero time when it has none.
func (n *Node) Ends() time.Time {
	if d := n.limit.Duration; d > 0 {
		return n.start.Add(d)
	}
	return time.Time{}
}

// Expire marks n's duration budget spent, as its owner does when the
// budget's time is up (a timer at Ends), whatever its threads are doing
// then, and returns it: the cause to cancel n's subtree with. It returns
// nil when n has no duration budget.
func (n *Node) Expire() *Exhausted {
	t := n.tree
	t.mu.Lock()
	defer t.mu.Unlock()
	d := n.limit.Duration
	if d <= 0 {
		return nil
	}
	// A timer fires at Ends or later; on another clock it might seem early.
	e := &Exhausted{Kind: KindDuration, Used: int64(max(t.now().Sub(n.start), d)), Limit: int64(d)}
	n.mark(e)
	return e
}

// Spent returns the first of n's own budgets found spent, or nil. For
// tokens, money and spawns, Used is the use now, which includes what calls in
// flight spent after the budget ran out.
func (n *Node) Spent() *Exhausted {
	n.tree.mu.Lock()
	defer n.tree.mu.Unlock()
	if n.spent == nil {
		return nil
	}
	e := *n.spent
	if i := slices.Index(tokenKinds[:], e.Kind); i >= 0 {
		e.Used = n.used[i]
	}
	if e.Kind == KindSpawns {
		e.Used = int64(n.spawns)
	}
	return &e
}

// Use is n's budget use: each bounded kind, used against its limit
// (durations in milliseconds).
func (n *Node) Use() Use {
	t := n.tree
	t.mu.Lock()
	defer t.mu.Unlock()
	u := Use{}
	for i, lim := range n.tokenLimits() {
		if lim > 0 {
			u[tokenKinds[i]] = Amount{Used: n.used[i], Limit: lim}
		}
	}
	if n.limit.Spawns > 0 {
		u[KindSpawns] = Amount{Used: int64(n.spawns), Limit: int64(n.limit.Spawns)}
	}
	if d := n.limit.Duration; d > 0 {
		el := t.now().Sub(n.start)
		if n.spent != nil && n.spent.Kind == KindDuration {
			el = time.Duration(n.spent.Used)
		}
		u[KindDuration] = Amount{Used: el.Milliseconds(), Limit: d.Milliseconds()}
	}
	return u
}

// Grant is what a thread may spend on model calls before it must ask its
// run's owner again. It travels to the thread's worker with the thread.
type Grant struct {
	Tokens       int64 `msgpack:"tokens"`
	InputTokens  int64 `msgpack:"input_tokens"`
	OutputTokens int64 `msgpack:"output_tokens"`
	// USD is the money, in micro-dollars, reserved for the thread's next
	// model call (the estimate its renewal asked for), or Unlimited when no
	// usd budget bounds the thread.
	USD int64 `msgpack:"usd"`
	// Remaining is the time left until the nearest duration budget ends;
	// zero means no duration budget bounds the thread.
	Remaining time.Duration `msgpack:"remaining,omitempty"`
	// Spent, when set, is the budget that is spent: no model call may start.
	Spent *Exhausted `msgpack:"spent,omitempty"`
}

// Lease is one thread's share of its budgets: tokens reserved for it at
// every node from its own up to the run's, so that the grants handed out
// never add up to more than any budget has left. A thread starts a model
// call only while its grant is positive; a call may spend past it, so a
// tree's overshoot is at most what its model calls in flight when the
// budget ran out spend.
//
// Money is reserved call by call instead: a renewal asks for the next
// call's estimated cost, which is reserved whole or refused, so the calls
// in flight never hold more than a usd budget has left, and a wide fan-out
// stops within about one call of it.
type Lease struct {
	node *Node
	held [nTokenKinds]int64
	// reported is what renewals have settled so far.
	reported Spend
}

// Lease opens a lease for a thread under n; settle it with Close.
func (n *Node) Lease() *Lease { return &Lease{node: n} }

// Node is the budget node the lease draws on.
func (l *Lease) Node() *Node { return l.node }

// grantShare is the fraction of what a budget has left that one grant takes.
const grantShare = 4

// Renew settles what the thread spent since its last grant, returns the
// rest of that grant, and hands out a new one. need is what the thread's
// next model call is estimated to cost, in micro-dollars: under a usd
// budget the grant reserves exactly that, or is refused when the budget
// cannot hold it (spent, and marked so, when what is used already leaves
// less than need; refused for now when calls in flight hold the rest).
func (l *Lease) Renew(s Spend, need int64) Grant {
	t := l.node.tree
	t.mu.Lock()
	defer t.mu.Unlock()
	need = max(need, 0)
	l.settle(s)
	now := t.now()
	g := Grant{}
	rem := [nTokenKinds]int64{Unlimited, Unlimited, Unlimited, Unlimited}
	for m := l.node; m != nil; m = m.parent {
		if e := m.check(now, false); e != nil {
			m.mark(e)
			return Grant{Spent: e}
		}
		for i, lim := range m.tokenLimits() {
			if lim <= 0 {
				continue
			}
			if i == iUSD {
				if m.used[i]+need > lim {
					e := &Exhausted{Kind: KindUSD, Used: m.used[i], Limit: lim}
					m.mark(e)
					return Grant{Spent: e}
				}
				if m.used[i]+m.reserved[i]+need > lim {
					// What is left is reserved by calls in flight.
					return Grant{Spent: &Exhausted{Kind: KindUSD, Used: m.used[i] + m.reserved[i], Limit: lim}}
				}
				rem[i] = need
				continue
			}
			left := lim - m.used[i] - m.reserved[i]
			if left <= 0 {
				// What is left is leased to other threads.
				return Grant{Spent: &Exhausted{Kind: tokenKinds[i], Used: m.used[i] + m.reserved[i], Limit: lim}}
			}
			rem[i] = min(rem[i], left)
		}
		if d := m.limit.Duration; d > 0 {
			left := d - now.Sub(m.start)
			if g.Remaining == 0 || left < g.Remaining {
				g.Remaining = left
			}
		}
	}
	for i, r := range rem {
		if r < Unlimited {
			if i != iUSD {
				r = (r + grantShare - 1) / grantShare
			}
			for m := l.node; m != nil; m = m.parent {
				if m.tokenLimits()[i] > 0 {
					m.reserved[i] += r
				}
			}
		}
		l.held[i] = r
	}
	g.Tokens, g.InputTokens, g.OutputTokens, g.USD = l.held[iTokens], l.held[iInput], l.held[iOutput], l.held[iUSD]
	return g
}

// Release settles what the thread spent since its last grant and gives
// back what the lease holds: the thread waits on helpers and makes no
// model call until it renews, so its share goes to them.
func (l *Lease) Release(s Spend) {
	t := l.node.tree
	t.mu.Lock()
	defer t.mu.Unlock()
	l.settle(s)
}

// Close settles the thread's whole own spending (the tokens and cost of all
// its model calls, as its result reports them) less what renewals settled
// already, and frees what the lease still holds.
func (l *Lease) Close(s Spend) { l.Account(s) }

// Account settles a thread's own spending known in full from elsewhere
// (what its journal says its model calls spent, when it is placed again)
// as Close does: what renewals settled counts, so nothing is counted twice,
// and the lease can be renewed afterwards.
func (l *Lease) Account(s Spend) {
	t := l.node.tree
	t.mu.Lock()
	defer t.mu.Unlock()
	l.settle(s.Less(l.reported))
}

// settle adds spending (negative counts are none) to every node up the
// chain and to what the lease reported, and releases the held reservation.
// t.mu is held.
func (l *Lease) settle(s Spend) {
	s = s.clamp()
	l.reported = l.reported.add(s)
	spent := s.kinds()
	for m := l.node; m != nil; m = m.parent {
		lims := m.tokenLimits()
		for i := range spent {
			m.used[i] += spent[i]
			if l.held[i] < Unlimited && lims[i] > 0 {
				m.reserved[i] -= l.held[i]
			}
		}
	}
	l.held = [nTokenKinds]int64{}
}

// kinds is s by the indexes of Node.used.
func (s Spend) kinds() [nTokenKinds]int64 {
	return [nTokenKinds]int64{s.In + s.Out, s.In, s.Out, s.Micros}
}

func (s Spend) clamp() Spend {
	return Spend{In: max(s.In, 0), Out: max(s.Out, 0), Micros: max(s.Micros, 0)}
}

func (s Spend) add(o Spend) Spend {
	return Spend{In: s.In + o.In, Out: s.Out + o.Out, Micros: s.Micros + o.Micros}
}

// Charge counts, at n and every node above it, what was spent in an earlier
// execution of the run and is reused now (a finished helper's subtree, from
// the journal): its tokens and cost, and spawns helpers started then. It
// never refuses: that work is done.
func (n *Node) Charge(s Spend, spawns int) {
	t := n.tree
	t.mu.Lock()
	defer t.mu.Unlock()
	spent := s.clamp().kinds()
	for m := n; m != nil; m = m.parent {
		for i := range spent {
			m.used[i] += spent[i]
		}
		m.spawns += spawns
	}
}
