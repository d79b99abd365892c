package api

import (
	containerlist "container/list"
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// connGate is the API's listener. It bounds the connections served at once (maxConns; further
// ones wait in the kernel's accept queue, as with netutil.LimitListener) and, among them, the
// connections that have not yet carried a request with the bearer token: at most share of
// them, each for at most the header timeout. Accepting one more of those closes the oldest, so
// that whoever opens connections without a token, and reopens each one cut, holds at most
// share of the slots and never keeps a client with the token waiting: a client's connection
// carries its request within a round trip and leaves the unauthenticated share then. Its state
// is guarded by mu; each connection closes once.
type connGate struct {
	net.Listener
	slots   chan struct{}
	share   int
	timeout time.Duration

	mu    sync.Mutex
	fresh containerlist.List // of *gateConn not yet authenticated, oldest first
}

// unauthShare is the share of the connection slots that connections without a token may
// hold: an eighth (32 of the default 256), at least one, and always one slot fewer than all,
// so that a new connection finds a slot and evicts the oldest of them.
func unauthShare(maxConns int) int { return max(min(maxConns/8, maxConns-1), 1) }

func newConnGate(ln net.Listener, maxConns int, timeout time.Duration) *connGate {
	return &connGate{Listener: ln, slots: make(chan struct{}, maxConns), share: unauthShare(maxConns), timeout: timeout}
}

// Accept waits for a free slot, then for a connection.
func (g *connGate) Accept() (net.Conn, error) {
	g.slots <- struct{}{}
	c, err := g.Listener.Accept()
	if err != nil {
		<-g.slots
		return nil, err
	}
	gc := &gateConn{Conn: c, g: g}
	g.mu.Lock()
	gc.elem = g.fresh.PushBack(gc)
	var evict *gateConn
	if g.fresh.Len() > g.share {
		evict = g.fresh.Front().Value.(*gateConn)
	}
	g.mu.Unlock()
	if evict != nil {
		evict.Close()
	}
	g.mu.Lock() // expire may run before AfterFunc returns: it reads timer under mu
	gc.timer = time.AfterFunc(g.timeout, gc.expire)
	g.mu.Unlock()
	return gc, nil
}

// gateConn is one connection the gate let through.
type gateConn struct {
	net.Conn
	g     *connGate
	elem  *containerlist.Element // in g.fresh while not authenticated; nil after (g.mu)
	timer *time.Timer            // set once, under g.mu
	once  sync.Once
}

// authenticated moves the connection out of the unauthenticated share: a request on it
// carried the bearer token.
func (c *gateConn) authenticated() {
	c.g.mu.Lock()
	if c.elem != nil {
		c.g.fresh.Remove(c.elem)
		c.elem = nil
	}
	t := c.timer
	c.g.mu.Unlock()
	t.Stop()
}

// expire closes the connection if it is still unauthenticated.
func (c *gateConn) expire() {
	c.g.mu.Lock()
	fresh := c.elem != nil
	c.g.mu.Unlock()
	if fresh {
		c.Close()
	}
}

// Close closes the connection and frees its slot, once.
func (c *gateConn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		c.g.mu.Lock()
		if c.elem != nil {
			c.g.fresh.Remove(c.elem)
			c.elem = nil
		}
		t := c.timer
		c.g.mu.Unlock()
		if t != nil {
			t.Stop()
		}
		err = c.Conn.Close()
		<-c.g.slots
	})
	return err
}

// connKey carries a request's connection in its context (http.Server.ConnContext).
type connKey struct{}

// withConn is the http.Server's ConnContext: it lets a handler reach its gateConn.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// authenticatedConn notes that r carried the bearer token: its connection leaves the
// unauthenticated share.
func authenticatedConn(r *http.Request) {
	if c, ok := r.Context().Value(connKey{}).(*gateConn); ok {
		c.authenticated()
	}
}
