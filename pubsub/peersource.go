package pubsub

import (
	"context"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/peer"
)

// PeerSource is where gossip finds peers for a topic it has too few of, when the node knows
// the mesh better than a generic rendezvous does. Every IACP node subscribes to the broadcast
// and heartbeat topics, so any IACP node will do for those; the members of a capability group
// are exactly the agents that advertise the capability. discovery.Discovery implements it.
type PeerSource interface {
	// Neighbours returns up to limit IACP nodes this node knows, without network traffic (for
	// example its DHT routing table).
	Neighbours(limit int) []peer.AddrInfo
	// CapabilityPeers returns up to limit peers whose agents advertise capability.
	CapabilityPeers(ctx context.Context, capability string, limit int) ([]peer.AddrInfo, error)
}

// peerSourceLimit bounds the peers one search returns: enough to fill a mesh (Dhi) twice.
const peerSourceLimit = 24

// advertiseTTL is what sourceDiscovery answers to gossipsub's Advertise: gossipsub
// re-advertises when it expires, which costs nothing here.
const advertiseTTL = time.Hour

// sourceDiscovery adapts a PeerSource to the discovery interface gossipsub takes. Topics are
// never advertised in the DHT: joining a universal topic needs no announcement, and a group
// member is already announced by its capability advertisement. With gossipsub's own
// rendezvous, every node would walk the DHT twice per topic on joining (advertise, then find),
// which at a mesh's start is more walks than discovery itself makes.
type sourceDiscovery struct {
	prefix string
	src    PeerSource
}

var _ discovery.Discovery = sourceDiscovery{}

// Advertise announces nothing; see sourceDiscovery.
func (sourceDiscovery) Advertise(context.Context, string, ...discovery.Option) (time.Duration, error) {
	return advertiseTTL, nil
}

// FindPeers returns the peers of the group whose topic ns names, or neighbours for any other
// topic of ours. gossipsub prefixes its namespaces with "floodsub:".
func (s sourceDiscovery) FindPeers(ctx context.Context, ns string, opts ...discovery.Option) (<-chan peer.AddrInfo, error) {
	var o discovery.Options
	if err := o.Apply(opts...); err != nil {
		return nil, err
	}
	limit := peerSourceLimit
	if o.Limit > 0 {
		limit = min(limit, o.Limit)
	}
	topic := strings.TrimPrefix(ns, "floodsub:")
	var found []peer.AddrInfo
	if cp, ok := strings.CutPrefix(topic, s.prefix+groupName); ok {
		var err error
		if found, err = s.src.CapabilityPeers(ctx, cp, limit); err != nil {
			return nil, err
		}
	} else {
		found = s.src.Neighbours(limit)
	}
	ch := make(chan peer.AddrInfo, len(found))
	for _, ai := range found {
		ch <- ai
	}
	close(ch)
	return ch, nil
}
