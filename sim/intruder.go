package sim

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// The expired intruder's clocks (startIntruder).
const (
	expiredAgo      = 40 * time.Second // its certificate expired this long ago
	expiredClockLag = 25 * time.Second // its clock is this far behind
)

// intruder is a node outside the scenario's slots, started by one intruder step.
type intruder struct {
	nd      *node.Node
	idx     int // its index on the mocknet, beyond the slots
	agentID string
	cert    *authority.Certificate // what it got by joining, to be revoked; nil for the others
}

// startIntruder starts the intruder of step `step`: a node with a key of its own, no
// discovery (it is told where the agents are), gossip on, durable delivery off (each send is
// one attempt whose refusal comes back at once). What it holds:
//
//   - none: it runs in open mode, with no certificate to show;
//   - expired: a certificate of the mesh for its agent id that expired expiredAgo ago. It
//     stands for a node that kept running after its certificate expired (its renewals
//     failed) without waiting for expiry plus the 30 s of skew that verifiers allow: its
//     clock runs expiredClockLag behind (within that skew, so its messages and the answers
//     it gets are on time), by which its own start check, which also allows 30 s, still
//     passes; every other node sees the certificate expired;
//   - revoked: the certificate it gets by redeeming an invitation from node 0, on the host
//     it will run on; runIntruder has it revoked once the intruder is connected.
func (c *cluster) startIntruder(ctx context.Context, step int, ip *intruderParams) (*intruder, error) {
	sk, _, err := crypto.GenerateEd25519Key(seededReader{c.rng})
	if err != nil {
		return nil, err
	}
	pid, _ := peer.IDFromPrivateKey(sk)
	in := &intruder{idx: len(c.slots) + step, agentID: fmt.Sprintf("sim:intruder:step%d", step)}
	if ip.As >= 0 {
		in.agentID = c.slots[ip.As].agentID
	}
	// The scenario's node configuration, as every slot's, but for what the intruder needs
	// (above).
	opts := []node.Option{
		node.WithConfig(c.sc.Node.nodeConfig(c.sc.Seed ^ uint64(step)<<32)),
		node.WithAgent(in.agentID, protocol.Manifest{Name: "sim intruder", Version: "sim"}),
		node.WithDataDir(filepath.Join(c.dir, fmt.Sprintf("intruder-%d", step))),
		node.WithLogger(c.log.With("node", "intruder", "step", step)),
		node.WithDiscovery(false),
		node.WithGossip(c.gossipOn()),
		node.WithDurable(false),
		node.WithAudit(false, false),
	}
	var inv *authority.Invite
	switch ip.Certificate {
	case CertRevoked:
		if inv, err = c.invite("the intruder", in.agentID); err != nil {
			return nil, err
		}
	case CertNone:
		opts = append(opts, node.WithTrust(node.TrustOpen))
	case CertExpired:
		raw, err := c.expiredCert(in.agentID, pid)
		if err != nil {
			return nil, err
		}
		opts = append(opts, node.WithAuthority(c.auth.ID(), raw),
			node.WithClock(func() time.Time { return time.Now().Add(-expiredClockLag) }))
	}
	if c.net != nil {
		sh, err := c.intruderHost(ctx, in, sk, inv)
		if err != nil {
			return nil, err
		}
		opts = append(opts, node.WithHost(sh, sk))
	} else {
		if inv != nil {
			if in.cert, err = redeemLoopback(ctx, "the intruder", sk, *inv, in.agentID, nil); err != nil {
				return nil, err
			}
		}
		opts = append(opts, node.WithKey(sk), node.WithListen("/ip4/127.0.0.1/tcp/0"), node.WithNAT(false))
	}
	if in.cert != nil {
		opts = append(opts, node.WithAuthority(c.auth.ID(), in.cert.Raw))
	}
	if in.nd, err = node.New(opts...); err != nil {
		if c.net != nil {
			c.net.isolate(in.idx)
			c.net.forget(in.idx)
		}
		return nil, fmt.Errorf("intruder: %w", err)
	}
	return in, nil
}

// expiredCert issues a certificate for agentID and pid that expired expiredAgo ago, from a
// copy of the mesh authority whose clock runs that far behind.
func (c *cluster) expiredCert(agentID string, pid peer.ID) (string, error) {
	issued := func() time.Time { return time.Now().Add(-expiredAgo - time.Second) }
	past, err := authority.New(c.authKey, authority.WithClock(issued))
	if err != nil {
		return "", err
	}
	cert, err := past.Issue(authority.CertRequest{AgentID: agentID, Peer: pid, TTL: time.Second})
	if err != nil {
		return "", err
	}
	return cert.Raw, nil
}

// intruderHost puts the intruder on the mocknet, linked to every running node, and redeems
// inv (if any) over its host. On error the intruder is off the mocknet again.
func (c *cluster) intruderHost(ctx context.Context, in *intruder, sk crypto.PrivKey, inv *authority.Invite) (_ *simHost, err error) {
	h, err := c.net.addPeer(in.idx, sk)
	if err != nil {
		return nil, err
	}
	n := c.sc.Node
	sh, err := newSimHost(h, n.ConnLow, n.ConnHigh, n.ConnGrace.D(), nil)
	if err != nil {
		_ = h.Close()
		c.net.forget(in.idx)
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = sh.Close()
			c.net.isolate(in.idx)
			c.net.forget(in.idx)
		}
	}()
	pid := h.ID()
	for _, j := range c.up() {
		if err := c.net.link(in.idx, j, pid, c.slots[j].pid); err != nil {
			return nil, err
		}
	}
	if inv != nil {
		if in.cert, err = redeem(ctx, "the intruder", sh, *inv, in.agentID, nil); err != nil {
			return nil, err
		}
	}
	return sh, nil
}

// introduce tells the intruder where every running agent is and connects it to each, then
// waits until its gossip has a peer on the broadcast topic (else its broadcasts would reach
// nobody, and prove nothing).
func (c *cluster) introduce(ctx context.Context, in *intruder, up []int, timeout time.Duration) error {
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, j := range up {
		nd := c.node(j)
		if nd == nil {
			continue
		}
		ai := peer.AddrInfo{ID: nd.ID(), Addrs: nd.ListenAddrs()}
		in.nd.AddPeer(c.slots[j].agentID, ai)
		if err := in.nd.Connect(ictx, ai); err != nil {
			return fmt.Errorf("intruder: connecting to node %d: %w", j, err)
		}
	}
	if !in.nd.GossipOn() {
		return nil
	}
	if !waitFor(ictx, func() bool { _, b := in.nd.GossipPeers(); return b > 0 }) {
		return fmt.Errorf("intruder: no gossip peer on the broadcast topic within %s: its broadcasts would reach nobody", timeout)
	}
	return nil
}

// revoke has node 0 revoke the intruder's certificate, by its id (an intruder that claims a
// slot's agent id must not take that slot's own certificate with it), and waits until every
// running node applies the new list: revocation_applied_ms.
func (c *cluster) revoke(ctx context.Context, in *intruder, up []int, timeout time.Duration, res *StepResult) error {
	authNode := c.node(0)
	if authNode == nil {
		return fmt.Errorf("intruder: node 0, the mesh authority's node, is not running to revoke its certificate")
	}
	t0 := time.Now()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := authNode.Revoke(rctx, in.cert.ID, node.RevokeOptions{}); err != nil {
		return fmt.Errorf("intruder: revoking its certificate: %w", err)
	}
	seq := authNode.RevocationSeq()
	applied := func() bool {
		for _, j := range up {
			if nd := c.node(j); nd != nil && nd.RevocationSeq() < seq {
				return false
			}
		}
		return true
	}
	if !waitFor(rctx, applied) {
		return fmt.Errorf("intruder: not every node applied revocation list %d within %s", seq, timeout)
	}
	res.Metrics["revocation_applied_ms"] = ms(time.Since(t0))
	return nil
}

// stopIntruder closes the intruder's node and takes it off the mocknet.
func (c *cluster) stopIntruder(in *intruder) {
	if err := in.nd.Close(); err != nil {
		c.log.Debug("closing the intruder", "err", err.Error())
	}
	if c.net != nil {
		c.net.isolate(in.idx)
		c.net.forget(in.idx)
	}
}
