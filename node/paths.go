package node

import (
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// The path a peer is on (PeerInfo.Path).
const (
	// PathDirect is a connection the node or its peer dialed straight.
	PathDirect = "direct"
	// PathRelayed is a connection through a circuit relay: limited in time and bytes by the
	// relay (docs/node.md, "NAT traversal").
	PathRelayed = "relayed"
	// PathHolePunched is a direct connection opened by DCUtR hole punching, which upgraded a
	// relayed one.
	PathHolePunched = "hole-punched"
)

// maxPunched bounds the hole-punched connections remembered; past it, those of peers no
// longer connected go first, then any.
const maxPunched = 4096

// pathBook remembers which connections hole punching opened, and counts the punches: it is
// the hole-punching service's metrics tracer (holepunch.MetricsTracer). Its own mutex guards
// it; go-libp2p calls it from the punching goroutines.
type pathBook struct {
	mu        sync.Mutex
	punched   map[peer.ID][]string // remote peer -> local+remote multiaddrs of punched conns
	retries   map[peer.ID]*backoff // relayed-only peers asked for another punch (repunch)
	succeeded int
	failed    int
}

func newPathBook() *pathBook {
	return &pathBook{punched: make(map[peer.ID][]string), retries: make(map[peer.ID]*backoff)}
}

// tryAgain reports whether p, reached over relays only, is due another hole punch, and
// counts it: repunchTries at most, backing off from repunchBackoff.
func (b *pathBook) tryAgain(p peer.ID, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.retries[p]
	if r == nil {
		if len(b.retries) >= maxPunched {
			clear(b.retries)
		}
		r = &backoff{}
		b.retries[p] = r
	}
	if r.attempts >= repunchTries || now.Before(r.next) {
		return false
	}
	r.attempts++
	r.next = now.Add(repunchBackoff << (r.attempts - 1))
	return true
}

// settled forgets p's punch retries: it has a direct connection, or none.
func (b *pathBook) settled(p peer.ID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.retries, p)
}

// HolePunchFinished records a punch's outcome; directConn is the connection it opened, nil
// when it failed.
func (b *pathBook) HolePunchFinished(_ string, _ int, _ []ma.Multiaddr, _ []ma.Multiaddr, directConn network.ConnMultiaddrs) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if directConn == nil {
		b.failed++
		return
	}
	b.succeeded++
	c, ok := directConn.(network.Conn)
	if !ok {
		return
	}
	if len(b.punched) >= maxPunched {
		for p := range b.punched {
			delete(b.punched, p)
			break
		}
	}
	b.punched[c.RemotePeer()] = append(b.punched[c.RemotePeer()], connKey(c))
}

// DirectDialFinished is the tracer's count of direct dials tried before punching; the node
// does not report it.
func (b *pathBook) DirectDialFinished(bool) {}

func connKey(c network.ConnMultiaddrs) string {
	return c.LocalMultiaddr().String() + " " + c.RemoteMultiaddr().String()
}

// path says how the node reaches p over conns: hole-punched or direct if any connection is
// not relayed, else relayed. It forgets the punched connections of p that closed.
func (b *pathBook) path(p peer.ID, conns []network.Conn) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	keys := b.punched[p]
	path := ""
	var live []string
	for _, c := range conns {
		switch {
		case isRelayed(c.RemoteMultiaddr()):
			if path == "" {
				path = PathRelayed
			}
		case slices.Contains(keys, connKey(c)):
			path = PathHolePunched
			live = append(live, connKey(c))
		case path != PathHolePunched:
			path = PathDirect
		}
	}
	if len(live) > 0 {
		b.punched[p] = live
	} else {
		delete(b.punched, p)
	}
	return path
}

// counts returns the hole punches that succeeded and failed since the node started.
func (b *pathBook) counts() (succeeded, failed int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.succeeded, b.failed
}

// NATStatus is what a node knows of how others reach it (Node.NAT).
type NATStatus struct {
	// Reachability is "public", "private" or "unknown": what AutoNAT found, or what the
	// reachability setting declares; "unknown" too when NAT traversal is off.
	Reachability string
	// Advertised are the addresses the node gives its peers and its DHT record.
	Advertised []ma.Multiaddr
	// Reachable are the addresses AutoNAT v2 confirmed reachable from outside.
	Reachable []ma.Multiaddr
	// Relays are the relays the node holds a reservation with: its relay addresses go
	// through them.
	Relays []peer.ID
	// HolePunches counts the DCUtR hole punches with this node's peers since it started.
	HolePunchesSucceeded, HolePunchesFailed int
}

// NAT returns what the node knows of its reachability, its relays and its hole punches.
func (n *Node) NAT() NATStatus {
	st := NATStatus{Reachability: "unknown", Advertised: n.host.Addrs()}
	if r, ok := n.host.(interface{ Reachability() network.Reachability }); ok {
		switch r.Reachability() {
		case network.ReachabilityPublic:
			st.Reachability = ReachPublic
		case network.ReachabilityPrivate:
			st.Reachability = ReachPrivate
		}
	}
	if c, ok := n.host.(interface {
		ConfirmedAddrs() (reachable, unreachable, unknown []ma.Multiaddr)
	}); ok && n.cfg.NAT {
		st.Reachable, _, _ = c.ConfirmedAddrs()
	}
	for _, a := range st.Advertised {
		if !isRelayed(a) {
			continue
		}
		if relay, err := peer.AddrInfoFromP2pAddr(a.Decapsulate(ma.StringCast("/p2p-circuit"))); err == nil && !slices.Contains(st.Relays, relay.ID) {
			st.Relays = append(st.Relays, relay.ID)
		}
	}
	if n.paths != nil {
		st.HolePunchesSucceeded, st.HolePunchesFailed = n.paths.counts()
	}
	return st
}
