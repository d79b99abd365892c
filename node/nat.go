package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	lpevent "github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/autorelay"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Reachability values (Config.Reachability).
const (
	// ReachAuto lets AutoNAT find out whether the node is reachable from the internet.
	ReachAuto = "auto"
	// ReachPublic declares the node reachable (a bootstrap node or relay with a public address).
	ReachPublic = "public"
	// ReachPrivate declares the node unreachable (behind a NAT or a firewall).
	ReachPrivate = "private"
)

// hopProtocol is circuit relay v2's reservation and connect protocol: a peer that serves it
// is a relay.
const hopProtocol = "/libp2p/circuit/relay/0.2.0/hop"

// How a private node finds and keeps relays (go-libp2p's autorelay): one candidate is enough
// to reserve at once (a mesh has few relays, not the thousands autorelay's defaults expect);
// it asks the node for candidates at most every 5 s while it has fewer than it wants, keeps
// two reservations, and tries a relay that refused it again after a minute, not an hour.
const (
	relayWanted      = 2
	relayAskEvery    = 5 * time.Second
	relayRetryRefuse = time.Minute
)

// natOptions are the host's NAT traversal options (Config.NAT), all go-libp2p's own: AutoNAT
// v1 and v2 (the node serves both to its peers, and asks them whether it is reachable), the
// circuit relay transport, reservations with relays when private (autorelay, its candidates
// from relaySource), DCUtR hole punching (the hole punches counted by paths), the relay
// service when Config.Relay is set, and the address factory that keeps private addresses out
// of what a node reachable from outside advertises (advertised).
func natOptions(c *Config, boot []peer.AddrInfo, src *relaySource, paths *pathBook) []libp2p.Option {
	opts := []libp2p.Option{
		libp2p.EnableNATService(),
		libp2p.EnableAutoNATv2(),
		libp2p.EnableRelay(),
		libp2p.EnableHolePunching(holepunch.WithMetricsTracer(paths)),
		libp2p.AddrsFactory(advertised),
		libp2p.SwarmOpts(swarm.WithDialRanker(quicFirst)),
	}
	switch c.Reachability {
	case ReachPublic:
		opts = append(opts, libp2p.ForceReachabilityPublic())
	case ReachPrivate:
		opts = append(opts, libp2p.ForceReachabilityPrivate())
	}
	if c.Reachability != ReachPublic {
		src.boot = boot
		opts = append(opts, libp2p.EnableAutoRelayWithPeerSource(src.candidates,
			autorelay.WithMinCandidates(1), autorelay.WithBootDelay(0), autorelay.WithNumRelays(relayWanted),
			autorelay.WithMinInterval(relayAskEvery), autorelay.WithBackoff(relayRetryRefuse)))
	}
	if c.Relay {
		res := relayv2.DefaultResources()
		res.Limit = &relayv2.RelayLimit{Duration: c.RelayLimitDuration, Data: c.RelayLimitBytes}
		opts = append(opts, libp2p.EnableRelayService(relayv2.WithResources(res)))
	}
	return opts
}

// relaySource gives autorelay its relay candidates: connected peers that serve circuit relay
// v2 (identify told), then the bootstrap peers (autorelay checks that a candidate serves it
// before it reserves). The host is set once libp2p.New returns; until then there is none.
type relaySource struct {
	h    atomic.Pointer[host.Host]
	boot []peer.AddrInfo
}

func (s *relaySource) candidates(_ context.Context, num int) <-chan peer.AddrInfo {
	out := make(chan peer.AddrInfo, max(num, 0))
	defer close(out)
	hp := s.h.Load()
	if hp == nil {
		return out
	}
	h := *hp
	seen := map[peer.ID]bool{h.ID(): true}
	add := func(ai peer.AddrInfo) {
		if len(out) < num && !seen[ai.ID] {
			seen[ai.ID] = true
			out <- ai
		}
	}
	for _, p := range h.Network().Peers() {
		if ok, _ := h.Peerstore().SupportsProtocols(p, hopProtocol); len(ok) > 0 {
			add(h.Peerstore().PeerInfo(p))
		}
	}
	for _, ai := range s.boot {
		add(ai)
	}
	return out
}

// advertised is the host's address factory: what the node tells its peers (identify, its
// DHT record, invitations). A node with a public address or a relay address advertises only
// those: its loopback, private and link-local addresses mean nothing to peers outside its
// network, and would send them dialing into their own (two homes share 192.168.1.0/24). A
// node with neither, on a LAN or loopback mesh, advertises what it has.
func advertised(addrs []ma.Multiaddr) []ma.Multiaddr {
	if !slices.ContainsFunc(addrs, outsideReachable) {
		return addrs
	}
	return slices.DeleteFunc(slices.Clone(addrs), func(a ma.Multiaddr) bool { return !outsideReachable(a) })
}

// outsideReachable reports whether a peer outside the node's network may reach it at a: a
// public address, or a relay's address with /p2p-circuit.
func outsideReachable(a ma.Multiaddr) bool {
	return isRelayed(a) || manet.IsPublicAddr(a)
}

// isRelayed reports whether a goes through a circuit relay.
func isRelayed(a ma.Multiaddr) bool {
	_, err := a.ValueForProtocol(ma.P_CIRCUIT)
	return err == nil
}

// validateNAT checks the NAT traversal keys (Validate).
func (c *Config) validateNAT() error {
	switch {
	case c.Reachability != ReachAuto && c.Reachability != ReachPublic && c.Reachability != ReachPrivate:
		return fmt.Errorf("invalid config: reachability: auto, public or private (not %q)", c.Reachability)
	case (c.Relay || c.Reachability != ReachAuto) && !c.NAT:
		return errors.New("invalid config: relay and reachability need nat: true")
	case c.RelayLimitBytes < 16<<10 || c.RelayLimitBytes > 1<<30:
		return errors.New("invalid config: relay_limit_bytes: 16 KiB to 1 GiB")
	case c.RelayLimitDuration < 10*time.Second || c.RelayLimitDuration > 24*time.Hour:
		return errors.New("invalid config: relay_limit_duration: 10 s to 24 h")
	}
	return nil
}

// announceUnknown tells the host's services that the node's reachability is unknown, as it is
// at start: go-libp2p's AutoNAT says nothing until its first probe, 15 s in, and autorelay
// reserves relays only once told, so a node behind a NAT would have no relay address, and be
// unreachable, for those 15 s. Told "unknown", autorelay reserves at once; the DHT serves
// (kad-dht's ModeAutoServer) until AutoNAT finds the node private.
func announceUnknown(h host.Host) {
	em, err := h.EventBus().Emitter(new(lpevent.EvtLocalReachabilityChanged), eventbus.Stateful)
	if err != nil {
		return // the host's own AutoNAT reports in 15 s
	}
	defer em.Close()
	_ = em.Emit(lpevent.EvtLocalReachabilityChanged{Reachability: network.ReachabilityUnknown})
}

// presumedPrivate reports whether a node whose reachability is still unknown is taken to be
// behind a NAT: none of its own interface addresses is public, yet a bootstrap peer's is (it
// reaches the internet through a router). Its DHT starts as a client, and serves once AutoNAT
// finds it public. Any other node (a public host; a LAN or loopback mesh, where no address is
// public and AutoNAT never decides) serves until AutoNAT finds it private: peers that queried
// a DHT server behind a NAT would wait out a dial for every query that touched it.
func presumedPrivate(h host.Host, boot []peer.AddrInfo) bool {
	own, err := h.Network().InterfaceListenAddresses()
	if err != nil || slices.ContainsFunc(own, manet.IsPublicAddr) {
		return false
	}
	for _, ai := range boot {
		if slices.ContainsFunc(ai.Addrs, manet.IsPublicAddr) {
			return true
		}
	}
	return false
}

// quicTCPDelay is how much longer than go-libp2p's ranking a TCP dial waits for a QUIC dial to
// the same peer (quicFirst).
const quicTCPDelay = time.Second

// quicFirst is the host's dial ranking: go-libp2p's, with TCP to a peer that also has a QUIC
// address held back quicTCPDelay more (go-libp2p's own wait, 250 ms for a public address, is
// shorter than a QUIC handshake on a busy machine). A node behind a NAT learns its public
// address for a transport only from a peer it reached over that transport, and two nodes
// punch a hole only with a transport they both know an address for: connections to the public
// nodes of the mesh over QUIC, the transport whose punches succeed most, make that likely. A
// peer whose UDP is blocked is dialled over TCP at once: go-libp2p removes black-holed QUIC
// addresses before ranking.
func quicFirst(addrs []ma.Multiaddr) []network.AddrDelay {
	ranked := swarm.DefaultDialRanker(addrs)
	if !slices.ContainsFunc(addrs, isQUIC) {
		return ranked
	}
	for i, r := range ranked {
		if _, err := r.Addr.ValueForProtocol(ma.P_TCP); err == nil && !isRelayed(r.Addr) {
			ranked[i].Delay += quicTCPDelay
		}
	}
	return ranked
}

func isQUIC(a ma.Multiaddr) bool {
	_, err := a.ValueForProtocol(ma.P_QUIC_V1)
	return err == nil && !isRelayed(a)
}
