package node

import (
	"fmt"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
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
