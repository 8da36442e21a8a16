package browser_test

import (
	"io"
	"net"
	"sync"
	"testing"
)

// proxy forwards TCP connections to target until blocked: then it cuts
// every open connection and refuses new ones, as a network outage between
// the browser and the coordinator would.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	off    bool
	conns  map[net.Conn]struct{}
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.block()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.off {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *proxy) forward(c net.Conn) {
	if !p.track(c) {
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(up) {
		c.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// block cuts every connection and refuses new ones until unblock.
func (p *proxy) block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.off = true
	for c := range p.conns {
		c.Close()
	}
}

func (p *proxy) unblock() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.off = false
}
