package discovery

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/routing"
)

// Resolve returns the current record of an agent: its peer id and addresses, to dial it. The
// directory cache answers when it can; otherwise the DHT is walked. The error wraps
// protocol.ErrAgentNotFound when no record exists, it expired, or the agent left.
func (d *Discovery) Resolve(ctx context.Context, agentID string) (Record, error) {
	if err := protocol.ValidateAgentID(agentID); err != nil {
		return Record{}, fmt.Errorf("resolve: %w", err)
	}
	if d.isClosed() {
		return Record{}, ErrClosed
	}
	if r, ok := d.cache.lookup(agentID); ok {
		return live(r)
	}
	r, err := d.getRecord(ctx, AgentKey(agentID))
	if err != nil {
		return Record{}, err
	}
	return live(d.cache.put(r))
}

// Unreachable tells discovery that p, the peer Resolve gave for agentID, could not be reached;
// since is when the caller began the resolve that gave it (on the clock of WithClock). The
// cached record of the agent is dropped if it names p and was cached before since, and
// Unreachable reports whether it was: the next Resolve then walks the DHT, and finds where the
// agent is now if it moved, or reserved a relay, after the record was cached. A record that
// resolve itself fetched is what the DHT holds now, and stays. Only a cached record of p is
// dropped, so a caller cannot make discovery forget another peer's agent.
func (d *Discovery) Unreachable(agentID string, p peer.ID, since time.Time) bool {
	return d.cache.drop(agentID, p, since)
}

// definitive reports whether a lookup that failed with err says that the mesh holds no such
// record (ErrNoRecord): the DHT answered not found once the node settled in the mesh, or the
// node is the mesh alone (no bootstrap peer, nobody in its routing table). A node still
// joining cannot tell: the record may be where its walk does not reach yet.
func (d *Discovery) definitive(err error) bool {
	if errors.Is(err, routing.ErrNotFound) && d.settled() {
		return true
	}
	return err != nil && !d.joined() && d.alone()
}

// live turns a Left record into AGENT_NOT_FOUND.
func live(r Record) (Record, error) {
	if r.Left {
		return Record{}, protocol.Errorf(protocol.CodeAgentNotFound, "agent %s left the mesh", r.AgentID)
	}
	return r, nil
}

// getRecord fetches, verifies and returns the best record under a DHT key.
func (d *Discovery) getRecord(ctx context.Context, key string) (Record, error) {
	// Cancelling on return stops the lookup's tail (the DHT keeps walking after the quorum).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	val, err := d.dht.GetValue(ctx, key, dht.Quorum(d.cfg.quorum))
	if d.definitive(err) {
		return Record{}, protocol.Errorf(protocol.CodeAgentNotFound, "no agent record under %s: %w", key, ErrNoRecord)
	}
	if errors.Is(err, routing.ErrNotFound) {
		return Record{}, protocol.Errorf(protocol.CodeAgentNotFound, "no agent record under %s yet: this node has not settled in the mesh", key)
	}
	if err != nil {
		return Record{}, protocol.Errorf(protocol.CodeAgentNotFound, "look up %s: %w", key, err)
	}
	r, err := DecodeRecord(val)
	if err != nil {
		return Record{}, protocol.Errorf(protocol.CodeAgentNotFound, "record under %s: %w", key, err)
	}
	if !r.Expires.After(d.cfg.now()) {
		return Record{}, protocol.Errorf(protocol.CodeAgentNotFound, "record under %s expired", key)
	}
	return r, nil
}

// recordOfPeer returns the agent record of a peer (cache first), or false. It asks the peer
// itself over the direct record protocol first: only the peer can sign a record under its
// PeerKey, so its own answer is its newest record. When the direct fetch fails (unreachable,
// stalled, refused by the validator, nothing published), the DHT is walked.
func (d *Discovery) recordOfPeer(ctx context.Context, id peer.ID) (Record, bool) {
	if r, ok := d.cache.lookupPeer(id); ok {
		return r, true
	}
	if d.cfg.directTimeout > 0 {
		r, err := d.fetchDirect(ctx, id)
		if err == nil {
			return d.cache.putPeer(r), true
		}
		d.log.Debug("direct record fetch failed; asking the DHT", "remote", id.String(), "err", err)
	}
	r, err := d.getRecord(ctx, PeerKey(id))
	if err != nil {
		d.log.Debug("provider has no usable agent record", "remote", id.String(), "err", err)
		return Record{}, false
	}
	return d.cache.putPeer(r), true
}

// providers returns the peers that provide a capability (cache first), calling found for each
// as soon as it is known, so that record fetches overlap the rest of the DHT walk. A walk's
// answer is cached for the cache TTL once the node has settled in the mesh (joined, and its
// routing table refreshed after the join): a walk made before that, through the few peers the
// node knew on joining, may have missed most providers, and must not answer for a minute.
func (d *Discovery) providers(ctx context.Context, c capability, found func(peer.ID)) ([]peer.ID, error) {
	if ps, ok := d.cache.providersOf(c); ok {
		for _, id := range ps {
			found(id)
		}
		return ps, nil
	}
	settled := d.settled()
	out, err := d.walkProviders(ctx, c, found)
	if err != nil {
		return nil, err
	}
	if settled {
		d.cache.putProviders(c, out)
	}
	return out, nil
}

// walkProviders asks the DHT for the providers of a capability, calling found for each as it
// comes. It neither reads nor fills the cache.
func (d *Discovery) walkProviders(ctx context.Context, c capability, found func(peer.ID)) ([]peer.ID, error) {
	key, err := CapabilityCID(c.kind, c.name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out []peer.ID
	for ai := range d.dht.FindProvidersAsync(ctx, key, d.cfg.maxProviders) {
		out = append(out, ai.ID)
		if ai.ID != d.h.ID() && len(ai.Addrs) > 0 {
			// for the direct record fetch; short-lived, as the DHT does.
			d.h.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstore.TempAddrTTL)
		}
		found(ai.ID)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("find providers of %s: %w", c, err)
	}
	return out, nil
}

// fetcher fetches the agent records of peers as they are found, each peer once, at most
// DefaultFetchParallelism at a time.
type fetcher struct {
	d   *Discovery
	ctx context.Context
	sem chan struct{}
	wg  sync.WaitGroup

	mu   sync.Mutex
	recs map[peer.ID]*Record // nil value: fetch pending or failed
}

func (d *Discovery) newFetcher(ctx context.Context) *fetcher {
	return &fetcher{d: d, ctx: ctx, sem: make(chan struct{}, DefaultFetchParallelism), recs: map[peer.ID]*Record{}}
}

// add starts fetching the record of id unless it was started before.
func (f *fetcher) add(id peer.ID) {
	f.mu.Lock()
	if _, ok := f.recs[id]; ok {
		f.mu.Unlock()
		return
	}
	f.recs[id] = nil
	f.mu.Unlock()
	f.wg.Go(func() {
		select {
		case f.sem <- struct{}{}:
		case <-f.ctx.Done():
			return
		}
		defer func() { <-f.sem }()
		if r, ok := f.d.recordOfPeer(f.ctx, id); ok {
			f.mu.Lock()
			f.recs[id] = &r
			f.mu.Unlock()
		}
	})
}

// records waits for every fetch and returns the usable records of peers, in their order:
// peers without a record, and Left or expired records, are skipped.
func (f *fetcher) records(peers []peer.ID) []Record {
	for _, id := range peers {
		f.add(id)
	}
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Record
	now := f.d.cfg.now()
	for _, id := range peers {
		if r := f.recs[id]; r != nil && !r.Left && r.Expires.After(now) {
			out = append(out, *r)
		}
	}
	return out
}

// candidates looks up the providers of every capability in parallel, fetching records while
// the walks go on, and returns the usable records of the intersection (or union) of the sets.
// Providers outside the intersection may be fetched too (they are cached): the walks do not
// wait for each other.
func (d *Discovery) candidates(ctx context.Context, caps []capability, intersect bool) ([]Record, error) {
	f := d.newFetcher(ctx)
	sets := make([][]peer.ID, len(caps))
	errs := make([]error, len(caps))
	var wg sync.WaitGroup
	for i, c := range caps {
		wg.Go(func() { sets[i], errs[i] = d.providers(ctx, c, f.add) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		f.wg.Wait()
		return nil, err
	}
	return f.records(combine(sets, intersect)), nil
}

// FindByCapability returns the agents whose manifest has the capability (kind is KindTool,
// KindModel or KindDomain), sorted by agent id. An empty result is not an error.
func (d *Discovery) FindByCapability(ctx context.Context, kind, name string) ([]Record, error) {
	if _, err := CapabilityCID(kind, name); err != nil {
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "find by capability: %w", err)
	}
	if d.isClosed() {
		return nil, ErrClosed
	}
	c := capability{kind, protocol.NormalizeCapability(name)}
	recs, err := d.candidates(ctx, []capability{c}, false)
	if err != nil {
		return nil, err
	}
	var out []Record
	for _, r := range recs {
		if manifestSet(r.Manifest)[c] {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AgentID < out[j].AgentID })
	return out, nil
}

// Query evaluates a capability query (draft "Capability Query") against the agents that
// advertise its capabilities and returns the matches in rank order (docs/discovery.md,
// "Ranking"). Candidates are the providers of every required capability (the intersection);
// with no required capability, the providers of any preferred one. The manifests decide: an
// agent missing a required capability is excluded even if a stale provider record names it.
// constraints.locality must equal the manifest's deployment; constraints.max_latency_ms excludes
// agents whose peerstore latency EWMA is known and higher, and keeps those whose latency is
// unknown (Match.LatencyKnown is false). Live load comes from the LoadSource.
func (d *Discovery) Query(ctx context.Context, q protocol.CapabilityQuery) ([]Match, error) {
	if err := validateQuery(q); err != nil {
		return nil, err
	}
	if d.isClosed() {
		return nil, ErrClosed
	}
	required := capabilitiesOf(q.Required.Tools, q.Required.Models, q.Required.Domains)
	lookups, intersect := required, true
	if len(required) == 0 {
		lookups, intersect = capabilitiesOf(q.Preferred.Tools, q.Preferred.Models, q.Preferred.Domains), false
	}
	recs, err := d.candidates(ctx, lookups, intersect)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	matches := evaluate(q, recs, d.cfg.load, d.latency)
	if len(matches) == 0 {
		// An empty answer is never served from the cache: the next query walks the DHT again,
		// so that an agent that advertises meanwhile is found at once, not a cache TTL later.
		d.cache.forgetProviders(lookups)
	}
	return matches, nil
}

// combine returns the intersection (or union) of peer sets, in first-seen order.
func combine(sets [][]peer.ID, intersect bool) []peer.ID {
	count := map[peer.ID]int{}
	var order []peer.ID
	for _, s := range sets {
		seen := map[peer.ID]bool{}
		for _, id := range s {
			if seen[id] {
				continue
			}
			seen[id] = true
			if count[id] == 0 {
				order = append(order, id)
			}
			count[id]++
		}
	}
	var out []peer.ID
	for _, id := range order {
		if !intersect || count[id] == len(sets) {
			out = append(out, id)
		}
	}
	return out
}

// latency is the peerstore's latency EWMA; zero means unknown.
func (d *Discovery) latency(id peer.ID) (time.Duration, bool) {
	l := d.h.Peerstore().LatencyEWMA(id)
	return l, l > 0
}
