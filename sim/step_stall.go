package sim

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// stallParams are the stall step's: peers without a certificate flood one node's gossip with
// broadcasts whose authors' certificates it must fetch from them, and their certificate
// protocol takes each request and never answers. Meanwhile a certified node broadcasts and
// node 0 revokes a member: the step measures what reached the attacked node.
type stallParams struct {
	// Target is the slot attacked (default 1).
	Target int `yaml:"target"`
	// Attackers is how many peers attack (default 40).
	Attackers int `yaml:"attackers"`
	// Rate is the broadcasts a second each attacker publishes (default 20).
	Rate float64 `yaml:"rate"`
	// Duration is how long the attack lasts (default 10s).
	Duration Duration `yaml:"duration"`
	// Broadcasts is how many broadcasts a certified node sends during the attack, evenly
	// spread (default 20).
	Broadcasts int `yaml:"broadcasts"`
	// Timeout bounds the wait for the attackers' gossip, the revocation and the broadcasts'
	// arrival after the attack (default 10s).
	Timeout Duration `yaml:"timeout"`
}

var parseStall = params(stallParams{Target: 1, Attackers: 40, Rate: 20, Duration: Duration(10 * time.Second), Broadcasts: 20, Timeout: Duration(10 * time.Second)},
	func(p *stallParams, sc *Scenario) error {
		switch {
		case sc.Trust != node.TrustAuthority:
			return fmt.Errorf("stall: needs trust: authority (the attack is on certificate fetches)")
		case sc.Network.Transport != TransportMocknet:
			return fmt.Errorf("stall: needs transport: mocknet")
		case sc.Node.Gossip != nil && !*sc.Node.Gossip:
			return fmt.Errorf("stall: needs gossip")
		case sc.Nodes < 3 || p.Target < 1 || p.Target >= sc.Nodes:
			return fmt.Errorf("stall: target %d must be a slot 1..%d (node 0 revokes; another node broadcasts)", p.Target, sc.Nodes-1)
		case p.Attackers < 1 || p.Attackers > 1000 || p.Rate <= 0 || p.Rate > 1000 || p.Broadcasts < 1 || p.Broadcasts > 1000:
			return fmt.Errorf("stall: attackers 1..1000, rate 0..1000 a second and broadcasts 1..1000")
		case p.Duration.D() <= 0 || p.Timeout.D() <= 0:
			return fmt.Errorf("stall: duration and timeout must be positive")
		}
		return nil
	})

// attacker is one stalling peer: a node without a certificate (open mode) on a host of the
// mocknet whose certificate protocol never answers, publishing as itself.
type attacker struct {
	h    host.Host
	nd   *node.Node
	idx  int
	sent atomic.Int64
}

// runStall runs the attack; see stallParams.
func runStall(ctx context.Context, r *run, p any, res *StepResult) error {
	sp := p.(*stallParams)
	c := r.c
	if c.net == nil {
		return fmt.Errorf("stall: needs the mocknet")
	}
	target, from := c.node(sp.Target), c.node(honestSender(sp.Target, c.up()))
	if target == nil || from == nil || c.node(0) == nil {
		return fmt.Errorf("stall: needs node 0, node %d and one more running", sp.Target)
	}
	member, err := c.stallMember(ctx, res.Index)
	if err != nil {
		return err
	}
	var asked atomic.Int64
	stop := make(chan struct{})
	attackers, err := c.startAttackers(ctx, res.Index, sp, &asked, stop)
	defer c.stopAttackers(attackers, stop)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	actx, cancel := context.WithTimeout(ctx, sp.Duration.D())
	defer cancel()
	for _, a := range attackers {
		wg.Go(func() { a.flood(actx, sp.Rate) })
	}
	var revoked time.Duration
	var revokeErr error
	wg.Go(func() {
		sleepCtx(actx, sp.Duration.D()/2)
		revoked, revokeErr = c.revokeUnderAttack(ctx, member, target, sp.Timeout.D())
	})
	keys := c.honestBroadcasts(actx, from, res.Index, sp)
	wg.Wait()
	if revokeErr != nil {
		return revokeErr
	}
	heard := c.awaitAt(ctx, keys, sp.Target, sp.Timeout.D())
	var sent int64
	for _, a := range attackers {
		sent += a.sent.Load()
	}
	res.Metrics["attacker_broadcasts"] = float64(sent)
	res.Metrics["certificate_requests_to_attackers"] = float64(asked.Load())
	res.Metrics["honest_broadcasts"] = float64(len(keys))
	res.Metrics["honest_delivery_ratio"] = ratio(heard, len(keys))
	res.Metrics["revocation_applied_ms"] = ms(revoked)
	return ctx.Err()
}

// honestSender is the first running slot that is neither node 0 nor the target, or node 0.
func honestSender(target int, up []int) int {
	for _, j := range up {
		if j != 0 && j != target {
			return j
		}
	}
	return 0
}

// stallMember is a member that joined by invitation from node 0, on a host of its own that
// runs no node: the certificate the step revokes during the attack.
func (c *cluster) stallMember(ctx context.Context, step int) (*authority.Certificate, error) {
	agentID := fmt.Sprintf("sim:stall:member%d", step)
	inv, err := c.invite("the member to revoke", agentID)
	if err != nil {
		return nil, err
	}
	sk, _, err := crypto.GenerateEd25519Key(seededReader{c.rng})
	if err != nil {
		return nil, err
	}
	idx := stallIndex(len(c.slots), step, 0)
	h, err := c.net.addPeer(idx, sk)
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = h.Close()
		c.net.isolate(idx)
		c.net.forget(idx)
	}()
	if err := c.net.link(idx, 0, h.ID(), c.slots[0].pid); err != nil {
		return nil, err
	}
	return redeem(ctx, "the member to revoke", h, *inv, agentID, nil)
}

// stallIndex is the mocknet index of a host of the stall step `step`: beyond the slots and
// the intruders' indices (one per step), a thousand per step.
func stallIndex(slots, step, i int) int { return slots + 1<<12 + step<<10 + i }

// startAttackers starts the attackers, each linked to the target alone, and waits until each
// has the target as a gossip peer on the broadcast topic.
func (c *cluster) startAttackers(ctx context.Context, step int, sp *stallParams, asked *atomic.Int64, stop <-chan struct{}) ([]*attacker, error) {
	target := c.slots[sp.Target]
	var out []*attacker
	for i := range sp.Attackers {
		sk, _, err := crypto.GenerateEd25519Key(seededReader{c.rng})
		if err != nil {
			return out, err
		}
		a := &attacker{idx: stallIndex(len(c.slots), step, 1+i)}
		if a.h, err = c.net.addPeer(a.idx, sk); err != nil {
			return out, err
		}
		out = append(out, a)
		if a.nd, err = node.New(
			node.WithConfig(c.sc.Node.nodeConfig(c.sc.Seed^uint64(step)<<32^uint64(i+1)<<40)),
			node.WithAgent(fmt.Sprintf("sim:stall:attacker%d.%d", step, i), protocol.Manifest{Name: "sim attacker", Version: "sim"}),
			node.WithDataDir(filepath.Join(c.dir, fmt.Sprintf("stall-%d-%d", step, i))),
			node.WithLogger(c.log.With("node", "attacker", "step", step, "attacker", i)),
			node.WithTrust(node.TrustOpen), node.WithDiscovery(false), node.WithGossip(true),
			node.WithDurable(false), node.WithAudit(false, false), node.WithHost(a.h, sk)); err != nil {
			return out, fmt.Errorf("stall: attacker %d: %w", i, err)
		}
		a.h.SetStreamHandler(node.CertProtocolID, func(s network.Stream) {
			asked.Add(1)
			<-stop // takes the request, never answers
			s.Reset()
		})
		if err := c.net.link(a.idx, sp.Target, a.h.ID(), target.pid); err != nil {
			return out, err
		}
		if err := a.h.Connect(ctx, peer.AddrInfo{ID: target.pid, Addrs: c.node(sp.Target).ListenAddrs()}); err != nil {
			return out, fmt.Errorf("stall: attacker %d connecting to node %d: %w", i, sp.Target, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, sp.Timeout.D())
	defer cancel()
	for i, a := range out {
		if !waitFor(wctx, func() bool { _, b := a.nd.GossipPeers(); return b > 0 }) {
			return out, fmt.Errorf("stall: attacker %d has no gossip peer on the broadcast topic within %s", i, sp.Timeout)
		}
	}
	return out, nil
}

// flood publishes broadcasts at rate a second until ctx ends.
func (a *attacker) flood(ctx context.Context, perSecond float64) {
	t := time.NewTicker(time.Duration(float64(time.Second) / perSecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := a.nd.Broadcast(ctx, protocol.EventPayload{EventType: "sim.stall.flood"}); err == nil {
				a.sent.Add(1)
			}
		}
	}
}

// stopAttackers ends the requests their hosts hold, closes the attackers and takes them off
// the mocknet.
func (c *cluster) stopAttackers(as []*attacker, stop chan struct{}) {
	close(stop)
	for _, a := range as {
		if a.nd != nil {
			_ = a.nd.Close()
		}
		_ = a.h.Close()
		c.net.isolate(a.idx)
		c.net.forget(a.idx)
	}
}

// honestBroadcasts has from broadcast sp.Broadcasts events evenly over the attack and returns
// their keys.
func (c *cluster) honestBroadcasts(ctx context.Context, from *node.Node, step int, sp *stallParams) []string {
	every := sp.Duration.D() / time.Duration(sp.Broadcasts)
	var keys []string
	for k := range sp.Broadcasts {
		key := fmt.Sprintf("sim.stall.%d.%d", step, k)
		c.rec.expect(key)
		if _, err := from.Broadcast(ctx, protocol.EventPayload{EventType: key, Detail: "honest, under attack"}); err != nil {
			c.log.Debug("an honest broadcast did not leave its node", "err", err.Error())
		}
		keys = append(keys, key)
		sleepCtx(ctx, every)
	}
	return keys
}

// revokeUnderAttack has node 0 revoke member and returns how long the list took to reach
// target.
func (c *cluster) revokeUnderAttack(ctx context.Context, member *authority.Certificate, target *node.Node, timeout time.Duration) (time.Duration, error) {
	t0 := time.Now()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	authNode := c.node(0)
	if _, err := authNode.Revoke(rctx, member.ID, node.RevokeOptions{}); err != nil {
		return 0, fmt.Errorf("stall: revoking the member: %w", err)
	}
	seq := authNode.RevocationSeq()
	if !waitFor(rctx, func() bool { return target.RevocationSeq() >= seq }) {
		return 0, fmt.Errorf("stall: the attacked node did not apply revocation list %d within %s", seq, timeout)
	}
	return time.Since(t0), nil
}

// awaitAt waits at most timeout for slot i to hear every key, and returns how many it heard.
func (c *cluster) awaitAt(ctx context.Context, keys []string, i int, timeout time.Duration) int {
	heard := func() int {
		n := 0
		for _, k := range keys {
			if _, ok := c.rec.receipts(k, false)[i]; ok {
				n++
			}
		}
		return n
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	waitFor(wctx, func() bool { return heard() == len(keys) })
	n := heard()
	for _, k := range keys {
		c.rec.receipts(k, true)
	}
	return n
}
