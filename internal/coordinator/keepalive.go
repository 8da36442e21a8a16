package coordinator

import (
	"sync"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/wire"
)

// keepalive sends progress on every long request in flight once per tick, so
// their requesters know this coordinator is alive.
type keepalive struct {
	mu       sync.Mutex
	repliers map[*alivePing]struct{}
}

// alivePing is one request kept alive. Its progress message is built when
// a ping is due, not when the request arrives: most requests are answered
// before the first ping.
type alivePing struct {
	r      transport.Replier
	thread string // the thread the request concerns, if any (under keepalive.mu)
}

func (k *keepalive) add(r transport.Replier, thread string) *alivePing {
	p := &alivePing{r: r, thread: thread}
	k.mu.Lock()
	k.repliers[p] = struct{}{}
	k.mu.Unlock()
	return p
}

// name makes p's pings name thread from now on.
func (k *keepalive) name(p *alivePing, thread string) {
	k.mu.Lock()
	p.thread = thread
	k.mu.Unlock()
}

func (k *keepalive) remove(p *alivePing) {
	k.mu.Lock()
	delete(k.repliers, p)
	k.mu.Unlock()
}

func (k *keepalive) ping() {
	k.mu.Lock()
	ds := make([]alivePing, 0, len(k.repliers))
	for p := range k.repliers {
		ds = append(ds, *p)
	}
	k.mu.Unlock()
	for _, d := range ds {
		m := progressPing
		if d.thread != "" {
			m = wire.Message(wire.TypeProgress, wire.Progress{ThreadID: d.thread})
		}
		d.r.Reply(m)
	}
}
