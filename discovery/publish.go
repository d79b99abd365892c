package discovery

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
	kb "github.com/libp2p/go-libp2p-kbucket"
	"github.com/libp2p/go-libp2p/core/event"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Publish advertises the local agent: it signs an agent record (seq = now in unix nanoseconds,
// expiry = now + record TTL), stores it under AgentKey and PeerKey, and provides every tool,
// model and domain of the manifest under its CapabilityCID. The manifest is kept: the record is
// republished at half its TTL, and at once after the bootstrap loop (re)joins the mesh, so a
// Publish that failed because the node had not joined yet is repaired without the caller. A
// node hosts one agent: publishing another agent id requires Leave first.
func (d *Discovery) Publish(ctx context.Context, m protocol.Manifest) error {
	if err := d.setLocal(m); err != nil {
		return err
	}
	return d.publishLocal(ctx, false)
}

// Announce sets the agent to advertise, like Publish, but returns at once: the republish loop
// publishes the record as soon as the node has joined the mesh, and again at half its TTL. A
// node starting up announces rather than publishes, since a walk before the join finds no
// peer to store the record with. Status tells when the record is out.
func (d *Discovery) Announce(m protocol.Manifest) error {
	if err := d.setLocal(m); err != nil {
		return err
	}
	d.kickRepublish()
	return nil
}

// setLocal makes m the local agent's manifest.
func (d *Discovery) setLocal(m protocol.Manifest) error {
	if err := protocol.ValidateAgentID(m.AgentID); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.closed:
		return ErrClosed
	case d.local != nil && d.local.manifest.AgentID != m.AgentID:
		return fmt.Errorf("publish %s: this node already publishes agent %s; call Leave first", m.AgentID, d.local.manifest.AgentID)
	}
	d.local = &localAgent{manifest: cloneManifest(m)}
	d.boot.left = false
	return nil
}

// acquirePublish waits, until ctx ends, for the right to publish: publishes and Leave run one
// at a time, since two concurrent ones race their puts (the older seq is refused by peers that
// already hold the newer, and a republish could overwrite a "left" record).
func (d *Discovery) acquirePublish(ctx context.Context) error {
	select {
	case d.pubSem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("publish: waiting for the publish in progress: %w", ctx.Err())
	}
}

func (d *Discovery) releasePublish() { <-d.pubSem }

// publishLocal signs and stores the current local record and provides its capabilities. With
// ifNeeded (a kick of the republish loop) it publishes only if the record still needs it once
// the publish in progress, if any, is done: a kick that came while Publish was storing the
// record would otherwise store it a second time under a new seq.
func (d *Discovery) publishLocal(ctx context.Context, ifNeeded bool) error {
	if err := d.acquirePublish(ctx); err != nil {
		return err
	}
	defer d.releasePublish()
	if ifNeeded && !d.needsPublish() {
		return nil
	}
	d.mu.Lock()
	if d.local == nil {
		d.mu.Unlock()
		return nil
	}
	m := d.local.manifest
	onlyMoved := ifNeeded && d.local.misplaced && !d.local.needsFull()
	d.mu.Unlock()
	rec := d.newRecord(m.AgentID, false)
	rec.Manifest = m
	from := d.placement()
	if onlyMoved {
		return d.move(ctx, rec, from)
	}
	// The record and the capability advertisements are independent walks: run them together.
	var storeErr, provideErr error
	var wg sync.WaitGroup
	wg.Go(func() { storeErr = d.store(ctx, rec) })
	wg.Go(func() { provideErr = d.provide(ctx, m) })
	wg.Wait()
	err := errors.Join(storeErr, provideErr)
	d.mu.Lock()
	if d.local != nil && d.local.manifest.AgentID == m.AgentID {
		d.local.lastErr = err
		if err == nil {
			d.local.seq, d.local.published = rec.Seq, d.cfg.now()
			d.local.placed, d.local.stale, d.local.misplaced, d.local.addrs = from, false, false, rec.Addrs
		}
	}
	d.mu.Unlock()
	if err != nil {
		d.setError(err)
		return err
	}
	d.cache.put(rec)
	d.log.Debug("agent record published", "agent", m.AgentID, "seq", rec.Seq)
	return nil
}

// move stores the record again under its agent key only, with the peers closest to it now:
// what agent lookups walk to. The peer key and the capability advertisements, which lookups
// by agent do not need, stay where they are until the next full publish, whose schedule is
// left as it was.
func (d *Discovery) move(ctx context.Context, rec Record, from placement) error {
	err := d.storeUnder(ctx, rec, AgentKey(rec.AgentID))
	d.mu.Lock()
	if d.local != nil && d.local.manifest.AgentID == rec.AgentID && err == nil {
		d.local.placed, d.local.misplaced = from, false
	}
	d.mu.Unlock()
	if err != nil {
		// The record stays where it was, and is moved at the next kick or full publish.
		d.log.Debug("moving the agent record failed", "agent", rec.AgentID, "err", err)
		return err
	}
	d.cache.put(rec)
	d.log.Debug("agent record moved to the peers closest now", "agent", rec.AgentID, "seq", rec.Seq)
	return nil
}

// newRecord returns an unsigned record for the local peer with a fresh seq and expiry, and the
// node's current certificate (WithCertificate).
func (d *Discovery) newRecord(agentID string, left bool) Record {
	now := d.cfg.now()
	d.mu.Lock()
	seq := uint64(now.UnixNano())
	if d.local != nil && seq <= d.local.seq {
		seq = d.local.seq + 1
	}
	if d.local != nil {
		d.local.seq = seq
	}
	d.mu.Unlock()
	rec := Record{AgentID: agentID, PeerID: d.h.ID(), Seq: seq, Expires: now.Add(d.cfg.recordTTL), Left: left}
	if d.cfg.cert != nil {
		rec.Cert = d.cfg.cert()
	}
	if !left {
		rec.Addrs = publicAddrs(d.h.Addrs())
	}
	return rec
}

// publicAddrs drops loopback addresses when others exist, and bounds the list.
func publicAddrs(addrs []ma.Multiaddr) []ma.Multiaddr {
	var out, loop []ma.Multiaddr
	for _, a := range addrs {
		if manet.IsIPLoopback(a) {
			loop = append(loop, a)
		} else {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		out = loop
	}
	if len(out) > MaxRecordAddrs {
		out = out[:MaxRecordAddrs]
	}
	return out
}

// store signs rec and puts it under both keys, in parallel.
func (d *Discovery) store(ctx context.Context, rec Record) error {
	return d.storeUnder(ctx, rec, AgentKey(rec.AgentID), PeerKey(rec.PeerID))
}

// storeUnder signs rec and puts it under each of keys, in parallel.
func (d *Discovery) storeUnder(ctx context.Context, rec Record, keys ...string) error {
	val, err := SignRecord(rec, d.key)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(keys))
	for i, key := range keys {
		wg.Go(func() {
			if err := answered(ctx, func(ctx context.Context) error { return d.dht.PutValue(ctx, key, val) }); err != nil {
				errs[i] = fmt.Errorf("put %s: %w", key, err)
			}
		})
	}
	wg.Wait()
	if slices.Contains(errs, nil) {
		// the record is in the DHT under at least one key: serve it directly from now on.
		d.setServed(val, rec.Seq)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("publish agent record of %s (is the node joined? see Status): %w", rec.AgentID, err)
	}
	return nil
}

// provide announces every capability of m, in parallel.
func (d *Discovery) provide(ctx context.Context, m protocol.Manifest) error {
	caps := capabilitiesOf(m.Tools, m.Models, m.Domains)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(caps))
	for i, c := range caps {
		wg.Go(func() {
			key, err := CapabilityCID(c.kind, c.name)
			if err == nil {
				err = answered(ctx, func(ctx context.Context) error { return d.dht.Provide(ctx, key, true) })
			}
			if err != nil {
				errs[i] = fmt.Errorf("provide %s: %w", c, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("advertise capabilities of %s: %w", m.AgentID, err)
	}
	return nil
}

// Leave publishes a Left record for the local agent (under both keys), so that lookups stop
// returning it, and stops republishing. Capability provider records cannot be withdrawn from a
// DHT; they expire, and lookups skip peers whose record says Left. Call it before Close on a
// clean shutdown.
func (d *Discovery) Leave(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	if d.local == nil {
		d.mu.Unlock()
		return fmt.Errorf("leave: %w", ErrNotPublished)
	}
	agentID := d.local.manifest.AgentID
	d.mu.Unlock()
	if err := d.acquirePublish(ctx); err != nil {
		return fmt.Errorf("leave: %w", err)
	}
	defer d.releasePublish()
	rec := d.newRecord(agentID, true)
	if err := d.store(ctx, rec); err != nil {
		d.setError(err)
		return fmt.Errorf("leave: %w", err)
	}
	d.mu.Lock()
	d.local = nil
	d.boot.left = true
	d.mu.Unlock()
	d.cache.put(rec)
	d.log.Info("agent left the mesh", "agent", agentID, "seq", rec.Seq)
	return nil
}

// kickRepublish asks the republish loop to publish now; it never blocks.
func (d *Discovery) kickRepublish() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// republishLoop republishes the local record at half the record TTL, when kicked, and when the
// host's addresses change from those the record carries (addrs, nil if the host's event bus
// could not be subscribed: then at half the TTL only). A
// failed publish is retried with the bootstrap backoff (jittered by r, which this loop owns):
// the join is declared when a bootstrap peer answers, which can be an instant before the DHT
// has put it in the routing table.
func (d *Discovery) republishLoop(r *rand.Rand, addrs event.Subscription) {
	every := d.cfg.recordTTL / 2
	t := time.NewTimer(every)
	defer t.Stop()
	var changed <-chan any
	if addrs != nil {
		defer addrs.Close()
		changed = addrs.Out()
	}
	failed := 0
	for {
		kicked := false
		select {
		case <-d.ctx.Done():
			return
		case <-changed:
			if !d.addrsChanged() || !d.joined() {
				continue
			}
			kicked = true
		case <-t.C:
			if failed > 0 && !d.needsPublish() {
				failed = 0 // a Publish call succeeded meanwhile: the record is fresh
				t.Reset(every)
				continue
			}
		case <-d.kick:
			if !d.needsPublish() || !(d.joined() || d.alone()) {
				continue // the join kicks again
			}
			kicked = true
		}
		ctx, cancel := context.WithTimeout(d.ctx, every)
		err := d.publishLocal(ctx, kicked)
		cancel()
		wait := every
		switch {
		case err != nil && d.alone():
			// The first node of a mesh stores its record in its own DHT table, where the
			// first peers to join find it; the walk to other peers fails until they come,
			// and the join kicks the publish again.
			d.log.Debug("agent record kept locally until a peer joins", "err", err)
		case err != nil && d.ctx.Err() == nil:
			failed++
			wait = d.cfg.backoff.Delay(failed, r.Int64N)
			d.log.Warn("publishing the agent record failed; will retry", "err", err, "retry_in", wait.String())
		default:
			failed = 0
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(wait)
	}
}

// needsPublish reports whether a kick should publish: something to publish whose last attempt
// failed, that was never published, or whose placement is stale.
func (d *Discovery) needsPublish() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.local != nil && (d.local.needsFull() || d.local.misplaced)
}

// needsFull reports whether the record needs a full publish, both keys and the capability
// advertisements: it was never published, its last attempt failed, or it is stale.
func (l *localAgent) needsFull() bool {
	return l.published.IsZero() || l.lastErr != nil || l.stale
}

// placement describes the routing table a record is placed from: its size, and its depth,
// the common prefix length of its k-th closest peer with the node's own key (k is the bucket
// size, the DHT's replication factor). In a mesh of N nodes the depth is about log2(N/k): it
// grows by one each time the mesh doubles. It is -1 while the table holds fewer than k peers.
type placement struct{ size, depth int }

// placement returns the routing table's placement now.
func (d *Discovery) placement() placement {
	rt := d.dht.RoutingTable()
	p := placement{size: rt.Size(), depth: -1}
	self := kb.ConvertPeerID(d.h.ID())
	if near := rt.NearestPeers(self, d.cfg.bucketSize); len(near) == d.cfg.bucketSize && len(near) > 0 {
		p.depth = kb.CommonPrefixLen(self, kb.ConvertPeerID(near[len(near)-1]))
	}
	return p
}

// maybeStale marks the local record for a publish when the mesh has grown enough since it
// was published that the peers closest to its keys are likely others than those that store
// it. A record published while the mesh was forming went to the closest peers the node knew
// then, and lookups that walk to the peers closest now would miss it until the half-TTL
// republish (in a simulated mesh that grew from 5 to 1000 nodes in five minutes, 7 lookups in
// 100, all of agents among the first 60 to join, found no record).
//
//   - Stale, all of it published again, when the routing table has doubled since a publish
//     from fewer than k peers (k the bucket size): every placement then was a guess.
//   - Misplaced, the record moved under its agent key only (move), when the table's depth has
//     grown since a publish from a full bucket: the mesh has about doubled, which a growing
//     mesh does log2(N) times, so the walk that follows the growth is the one that agent
//     lookups need, and the rest waits for the half-TTL republish.
func (d *Discovery) maybeStale(now placement) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.local
	if l == nil || l.published.IsZero() || l.stale || l.misplaced {
		return false
	}
	was := l.placed
	switch {
	case was.size < d.cfg.bucketSize && now.size >= 2*max(was.size, 1):
		l.stale = true
	case was.depth >= 0 && now.depth > was.depth:
		l.misplaced = true
	default:
		return false
	}
	return true
}

func cloneManifest(m protocol.Manifest) protocol.Manifest {
	m.Tools = append([]string(nil), m.Tools...)
	m.Models = append([]string(nil), m.Models...)
	m.Domains = append([]string(nil), m.Domains...)
	return m
}
