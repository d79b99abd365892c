package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
)

// relayHeadroom is the part of a relayed connection's data limit kept for what else crosses
// it (identify, hole punching, the multiplexer's and the encryption's framing): a frame
// crosses a relay only if it fits in the limit less this.
const relayHeadroom = 16 << 10

// fitsRelay refuses a frame of size bytes on a stream over a relayed connection whose relay
// would reset the connection before the frame got through (the relay's data limit, which the
// relay announced when the connection opened). The message waits in the outbox for a direct
// connection: hole punching opens one where the NATs allow it.
func fitsRelay(st network.Stream, size int) error {
	stat := st.Conn().Stat()
	if !stat.Limited {
		return nil
	}
	limit, ok := stat.Extra[client.StatLimitData].(uint64)
	if !ok || limit == 0 || uint64(size)+relayHeadroom <= limit {
		return nil
	}
	return fmt.Errorf("RELAY_LIMIT: a frame of %d bytes does not fit in the relay's limit of %d bytes a connection "+
		"(less %d for its other traffic); the message waits for a direct connection to the peer (hole punching, or a "+
		"relay with a higher relay_limit_bytes)", size, limit, relayHeadroom)
}

// retireRelayed retires s, and reports it, when it runs over a relayed connection and a
// direct one to its peer exists (hole punching opened it): the next message opens a session
// on the direct connection, out of the relay's limits. s is closed for writing only, so the
// receipts and replies of what was sent on it still come back on it, until its peer closes it.
func (n *Node) retireRelayed(s *session) bool {
	if !isRelayed(s.s.Conn().RemoteMultiaddr()) {
		return false
	}
	direct := false
	for _, c := range n.host.Network().ConnsToPeer(s.peer) {
		direct = direct || !isRelayed(c.RemoteMultiaddr())
	}
	if !direct {
		return false
	}
	n.sessionsMu.Lock()
	if n.sessions[s.peer] == s {
		delete(n.sessions, s.peer)
	}
	n.sessionsMu.Unlock()
	s.wmu.Lock()
	_ = s.s.CloseWrite()
	s.wmu.Unlock()
	return true
}

// How the node asks again for a hole punch with a peer it sends to over a relay only: after
// repunchAfter on the relayed connection, then backing off from repunchBackoff, at most
// repunchTries times. go-libp2p punches once, when a relayed connection comes in; a punch
// that failed (the peer's punching service was not up yet, a NAT that did not let it
// through) is not tried again while that connection lives.
const (
	repunchAfter   = 5 * time.Second
	repunchBackoff = 10 * time.Second
	repunchTries   = 3
)

// repunch is the maintain loop's turn at hole punching: for each peer the node has a session
// with whose connections are all relayed, it closes them and dials the peer again through
// its relay, in the background: the peer takes the new relayed connection as inbound and
// punches from its side. Closing interrupts what is in flight on the session; the sends
// retry (a resend the peer already has is a receipt).
func (n *Node) repunch(now time.Time) {
	n.sessionsMu.Lock()
	peers := make([]peer.ID, 0, len(n.sessions))
	for p := range n.sessions {
		peers = append(peers, p)
	}
	n.sessionsMu.Unlock()
	for _, p := range peers {
		conns := n.host.Network().ConnsToPeer(p)
		if len(conns) == 0 || slices.ContainsFunc(conns, func(c network.Conn) bool { return !isRelayed(c.RemoteMultiaddr()) }) {
			n.paths.settled(p)
			continue
		}
		oldest := now
		for _, c := range conns {
			if c.Stat().Opened.Before(oldest) {
				oldest = c.Stat().Opened
			}
		}
		if now.Sub(oldest) < repunchAfter || !n.paths.tryAgain(p, now) {
			continue
		}
		n.spawn(func() {
			for _, c := range conns {
				_ = c.Close()
			}
			ctx, cancel := context.WithTimeout(n.ctx, n.cfg.FrameTimeout)
			defer cancel()
			if err := n.host.Connect(network.WithAllowLimitedConn(ctx, "repunch"), peer.AddrInfo{ID: p}); err != nil {
				n.log.Debug("redial through the relay for a hole punch", "peer", p.ShortString(), "err", err.Error())
			}
		})
	}
}

// stallPing bounds the ping that tells a stalled direct connection from a slow peer.
const stallPing = 2 * time.Second

// dropStalled ends s when an attempt on it timed out without a receipt, and closes its
// connection if that is dead. A peer or relay that vanished without closing its connections (a
// crash, a network cut off, a laptop that moved) leaves them looking alive until QUIC's idle
// timeout, 30 s, and every retry would take the same dead path; closed, the next attempt dials
// the peer again: through another relay, directly, or at its new addresses. A relayed
// connection is closed at once (a relay may reset it anyway); a direct one only if the peer
// does not answer a ping within stallPing, in the background.
func (n *Node) dropStalled(s *session) {
	c := s.s.Conn()
	s.end(errStalled, true)
	if isRelayed(c.RemoteMultiaddr()) {
		_ = c.Close()
		return
	}
	n.spawn(func() {
		ctx, cancel := context.WithTimeout(n.ctx, stallPing)
		defer cancel()
		if res := <-ping.Ping(network.WithAllowLimitedConn(ctx, "stall"), n.host, s.peer); res.Error != nil && n.ctx.Err() == nil {
			_ = c.Close()
		}
	})
}

var errStalled = errors.New("no receipt in time; the session ends, and its connection if the peer does not answer a ping")
