package discovery

import (
	"context"
	"errors"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Neighbours returns up to limit peers of the DHT routing table with the addresses the
// peerstore knows: IACP nodes (the DHT runs under the private /iacp prefix), found without
// network traffic. Gossip takes its topic peers from here (it implements pubsub.PeerSource).
func (d *Discovery) Neighbours(limit int) []peer.AddrInfo {
	ids := d.dht.RoutingTable().ListPeers()
	if limit > 0 && len(ids) > limit {
		ids = ids[:limit]
	}
	out := make([]peer.AddrInfo, 0, len(ids))
	for _, id := range ids {
		out = append(out, d.h.Peerstore().PeerInfo(id))
	}
	return out
}

// CapabilityPeers returns up to limit peers (not this one) that provide a capability of this
// name, whatever its kind (tool, model or domain): the members of the capability's gossip
// group. Provider lookups go through the directory cache, so a group that stays small costs a
// DHT walk per kind only once per cache lifetime.
func (d *Discovery) CapabilityPeers(ctx context.Context, name string, limit int) ([]peer.AddrInfo, error) {
	if d.isClosed() {
		return nil, ErrClosed
	}
	kinds := []string{KindTool, KindModel, KindDomain}
	sets := make([][]peer.ID, len(kinds))
	errs := make([]error, len(kinds))
	var wg sync.WaitGroup
	for i, k := range kinds {
		wg.Go(func() {
			sets[i], errs[i] = d.providers(ctx, capability{k, NormalizeCapability(name)}, func(peer.ID) {})
		})
	}
	wg.Wait()
	ids := combine(sets, false)
	if len(ids) == 0 {
		return nil, errors.Join(errs...)
	}
	var out []peer.AddrInfo
	for _, id := range ids {
		if id == d.h.ID() {
			continue
		}
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, d.h.Peerstore().PeerInfo(id))
	}
	return out, nil
}
