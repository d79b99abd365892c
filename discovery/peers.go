package discovery

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

// Neighbours returns up to limit peers of the DHT routing table with the addresses the
// peerstore knows: IACP nodes (the DHT runs under the private /iacp prefix), found without
// network traffic, in random order. Gossip takes its topic peers from here (it implements
// pubsub.PeerSource).
func (d *Discovery) Neighbours(limit int) []peer.AddrInfo {
	ids := d.dht.RoutingTable().ListPeers()
	// Shuffled, so that repeated asks do not return the same bucket's peers.
	d.shuffle.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	if limit > 0 && len(ids) > limit {
		ids = ids[:limit]
	}
	out := make([]peer.AddrInfo, 0, len(ids))
	for _, id := range ids {
		out = append(out, d.h.Peerstore().PeerInfo(id))
	}
	return out
}

// groupPeersTTL is how long CapabilityPeers reuses a search whose answer is still changing:
// one that found no other member, or other members than the search before it. An answer that
// found members and held still across two searches is reused for the cache TTL (a minute by
// default) when that is longer. gossipsub asks every second for each topic it has too few
// peers of, and a small group may never have enough: without this, each node would walk the
// DHT three times a second per small group; reusing every answer for a minute would hold a
// node that searched while the mesh formed to the few members who had advertised by then.
const groupPeersTTL = 10 * time.Second

type groupPeers struct {
	ids   []peer.ID
	until time.Time
}

// CapabilityPeers returns up to limit peers (not this one) that provide a capability of this
// name, whatever its kind (tool, model or domain): the members of the capability's gossip
// group. A search is reused for groupPeersTTL, or for the cache TTL once its answer holds
// still (see groupPeersTTL); it takes the provider sets that capability lookups cached but
// never fills them (searchCapability).
func (d *Discovery) CapabilityPeers(ctx context.Context, name string, limit int) ([]peer.AddrInfo, error) {
	if d.isClosed() {
		return nil, ErrClosed
	}
	name = protocol.NormalizeCapability(name)
	now := d.cfg.now()
	d.mu.Lock()
	e, ok := d.groups[name]
	d.mu.Unlock()
	if !ok || !now.Before(e.until) {
		ids, err := d.searchCapability(ctx, name)
		if err != nil {
			return nil, err
		}
		ttl := groupPeersTTL
		found := slices.ContainsFunc(ids, func(id peer.ID) bool { return id != d.h.ID() })
		if found && ok && (sameIDs(ids, e.ids) || len(ids) >= d.cfg.maxProviders) {
			ttl = max(ttl, d.cfg.cacheTTL)
		}
		e = groupPeers{ids: ids, until: now.Add(ttl)}
		d.mu.Lock()
		if len(d.groups) >= maxGroupSearches {
			clear(d.groups)
		}
		d.groups[name] = e
		d.mu.Unlock()
	}
	var out []peer.AddrInfo
	for _, id := range e.ids {
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

// groupProviders is the providers of a capability for a group search: the set a capability
// lookup cached if there is one, else a walk of the DHT, whose answer is not cached for the
// lookups (see searchCapability).
func (d *Discovery) groupProviders(ctx context.Context, c capability) ([]peer.ID, error) {
	if ps, ok := d.cache.providersOf(c); ok {
		return ps, nil
	}
	return d.walkProviders(ctx, c, func(peer.ID) {})
}

// sameIDs reports whether a and b hold the same peers, in any order.
func sameIDs(a, b []peer.ID) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// maxGroupSearches bounds the remembered searches (a node is in a handful of groups).
const maxGroupSearches = 1024

// searchCapability finds the providers of name under every kind, in parallel. It fails only
// when every kind failed. It reads the provider sets that capability lookups cached but never
// fills them: gossip searches in the background, at its start as a rule, while the mesh may
// still be forming, and a set found before most agents had advertised must not answer the
// capability lookups of callers for the cache TTL (CapabilityPeers keeps its own answers, in
// its own map).
func (d *Discovery) searchCapability(ctx context.Context, name string) ([]peer.ID, error) {
	kinds := []string{KindTool, KindModel, KindDomain}
	sets := make([][]peer.ID, len(kinds))
	errs := make([]error, len(kinds))
	var wg sync.WaitGroup
	for i, k := range kinds {
		wg.Go(func() { sets[i], errs[i] = d.groupProviders(ctx, capability{k, name}) })
	}
	wg.Wait()
	ids := combine(sets, false)
	if len(ids) == 0 && errs[0] != nil && errs[1] != nil && errs[2] != nil {
		return nil, errors.Join(errs...)
	}
	return ids, nil
}
