package node

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/discovery"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
)

// startMesh builds discovery and gossip as configured. On error the caller closes what was
// built (closeMesh).
func (n *Node) startMesh() error {
	c := &n.cfg
	if c.Discovery {
		opts := []discovery.Option{
			discovery.WithBootstrapPeers(n.bootstrap),
			discovery.WithMDNS(c.MDNS),
			discovery.WithClock(c.Clock),
			discovery.WithLogger(n.log.With("subsystem", "discovery")),
			discovery.WithQuorum(c.DHTQuorum),
			discovery.WithBucketSize(c.DHTBucketSize),
			discovery.WithBackoff(c.BootstrapRetryMin, c.BootstrapRetryMax),
			discovery.WithHealthInterval(c.DHTHealthInterval),
		}
		if c.Seed != 0 {
			opts = append(opts, discovery.WithRand(rand.New(rand.NewPCG(c.Seed, 1))))
		}
		switch {
		case c.DHTClient || (c.NAT && c.Reachability == ReachPrivate):
			opts = append(opts, discovery.WithClientMode())
		case c.NAT && c.Reachability == ReachAuto:
			opts = append(opts, discovery.WithAutoMode(!presumedPrivate(n.host, n.bootstrap)))
		}
		opts = append(opts, c.DiscoveryOptions...)
		if c.Gossip {
			// Gossip, built below, takes discovery as its peer source; queries rank by the
			// load its heartbeats report.
			opts = append(opts, discovery.WithLoadSource(gossipLoad{n}))
		}
		d, err := discovery.New(n.host, n.key, opts...)
		if err != nil {
			return fmt.Errorf("discovery: %w", err)
		}
		n.disc = d
		n.AddResolver(dhtResolver{d})
	}
	if c.Gossip {
		opts := []pubsub.Option{
			pubsub.WithCapabilities(capabilities(n.cfg.Manifest)),
			pubsub.WithHeartbeatInterval(c.HeartbeatInterval),
			pubsub.WithSuspectAfter(c.SuspectAfter),
			pubsub.WithMeshBudget(c.MeshBudget),
			pubsub.WithConnLimit(c.ConnHigh),
			pubsub.WithLeaveFlush(c.LeaveFlush),
			pubsub.WithVersion(c.AgentVersion),
			pubsub.WithClock(c.Clock),
			pubsub.WithLogger(n.log.With("subsystem", "gossip")),
			pubsub.WithMaxAgents(c.MaxAgents),
			pubsub.WithVerifier(c.Verifier),
			pubsub.WithSeed(c.Seed),
		}
		if n.store != nil {
			// The gossip window comes back from the store and every delivered id goes to it
			// (journal.go).
			seen, err := n.store.GossipSeen(n.now())
			if err != nil {
				return fmt.Errorf("gossip: restore its replay window: %w", err)
			}
			opts = append(opts, pubsub.WithReplayRestore(seen), pubsub.WithDeliveredHook(n.journal.add))
		}
		if n.disc != nil {
			opts = append(opts, pubsub.WithPeerSource(n.disc))
		}
		g, err := pubsub.New(n.host, n.builder, append(opts, c.GossipOptions...)...)
		if err != nil {
			return fmt.Errorf("gossip: %w", err)
		}
		n.gossip = g
		n.watcher.Store(g)
		if n.certs != nil {
			// A revoked agent leaves the liveness table at once, rather than after its
			// silence (its beats are refused from now on).
			forget := func(c *authority.Certificate) {
				g.Forget(c.AgentID, c.Peer, "its certificate "+c.ID+" was revoked by the mesh authority")
			}
			n.certs.onRevoked.Store(&forget)
		}
	}
	if n.disc != nil {
		// Discovery publishes the record once the node has joined the mesh.
		if err := n.disc.Announce(n.Manifest()); err != nil {
			return fmt.Errorf("discovery: %w", err)
		}
	}
	return nil
}

// leaveMesh announces a clean departure: draining, then offline heartbeats, and a final DHT
// record that says the agent left.
func (n *Node) leaveMesh(ctx context.Context) {
	if n.gossip != nil {
		if err := n.gossip.Drain(ctx); err != nil {
			n.log.Debug("draining heartbeat", "err", err.Error())
		}
	}
	if n.disc != nil {
		if err := n.disc.Leave(ctx); err != nil {
			n.log.Debug("leave record", "err", err.Error())
		}
	}
	if n.gossip != nil {
		if err := n.gossip.Leave(ctx); err != nil {
			n.log.Debug("offline heartbeat", "err", err.Error())
		}
	}
}

// closeMesh stops gossip and discovery.
func (n *Node) closeMesh() error {
	var errs []error
	if n.gossip != nil {
		errs = append(errs, n.gossip.Close())
	}
	if n.disc != nil {
		errs = append(errs, n.disc.Close())
	}
	return errors.Join(errs...)
}

// capabilities lists the manifest's tools, models and domains: the capability groups the
// agent joins.
func capabilities(m protocol.Manifest) []string {
	var out []string
	out = append(out, m.Tools...)
	out = append(out, m.Models...)
	return append(out, m.Domains...)
}

// gossipLoad is discovery's load source: the live load the gossip's heartbeats report. The
// gossip is set once, in New, before the node is returned and anyone can query.
type gossipLoad struct{ n *Node }

func (l gossipLoad) Load(agentID string) (load float64, alive bool, known bool) {
	if g := l.n.gossip; g != nil {
		return g.Load(agentID)
	}
	return 0, false, false
}

// dhtResolver resolves agent ids through the DHT's agent records.
type dhtResolver struct{ d *discovery.Discovery }

func (r dhtResolver) ResolveAgent(ctx context.Context, agentID string) (peer.AddrInfo, error) {
	rec, err := r.d.Resolve(ctx, agentID)
	if err != nil {
		return peer.AddrInfo{}, err
	}
	if rec.Left {
		return peer.AddrInfo{}, protocol.Errorf(protocol.CodeAgentNotFound, "agent %s left the mesh", agentID)
	}
	return peer.AddrInfo{ID: rec.PeerID, Addrs: rec.Addrs}, nil
}
