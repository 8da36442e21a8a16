package quota

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Registry holds the limiters of many endpoints, keyed by endpoint: one
// per process for local calls, or one on the coordinator for the whole
// cluster. It is safe for concurrent use.
type Registry struct {
	mu       sync.Mutex
	limiters map[string]*Limiter
	onWait   atomic.Pointer[func(key string, waited time.Duration)]
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{limiters: map[string]*Limiter{}}
}

// SetOnWait makes f hear every wait of every limiter of r, with its key
// (Config.OnWait); nil stops it.
func (r *Registry) SetOnWait(f func(key string, waited time.Duration)) {
	if f == nil {
		r.onWait.Store(nil)
		return
	}
	r.onWait.Store(&f)
}

// Limiter returns key's limiter, creating it with declared on first use.
// A later caller declaring other limits lowers them field by field
// (Limits.Lower); declaring nothing changes nothing.
func (r *Registry) Limiter(key string, declared Limits) *Limiter {
	r.mu.Lock()
	l, ok := r.limiters[key]
	if !ok {
		l = New(Config{Name: key, Limits: declared, OnWait: func(d time.Duration) {
			if f := r.onWait.Load(); f != nil {
				(*f)(key, d)
			}
		}})
		r.limiters[key] = l
	}
	r.mu.Unlock()
	if ok && !declared.IsZero() {
		l.Declare(declared)
	}
	return l
}

// ReleaseOwner releases owner's tickets in every limiter (Limiter.
// ReleaseOwner) and returns how many it released.
func (r *Registry) ReleaseOwner(owner string) int {
	n := 0
	for _, l := range r.all() {
		n += l.ReleaseOwner(owner)
	}
	return n
}

// Snapshots returns every limiter's snapshot, by name.
func (r *Registry) Snapshots() []Snapshot {
	ls := r.all()
	s := make([]Snapshot, len(ls))
	for i, l := range ls {
		s[i] = l.Snapshot()
	}
	slices.SortFunc(s, func(a, b Snapshot) int { return strings.Compare(a.Name, b.Name) })
	return s
}

func (r *Registry) all() []*Limiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Collect(maps.Values(r.limiters))
}
