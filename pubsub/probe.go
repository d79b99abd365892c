package pubsub

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"
	msmux "github.com/multiformats/go-multistream"
)

// The direct tier of liveness (watch.go): a node probes each agent of its watch set once an
// interval unless it heard from it meanwhile. A probe is one stream of the probe protocol
// (<topic prefix>live): the prober writes its last signed heartbeat, the probed node reads it
// and answers with its own, and each side takes the other's beat as it takes one heard on the
// heartbeat topic, so that two agents that watch each other cost one probe an interval, not
// two. The stream's peer is authenticated by the transport: a beat must be signed by it, so
// no replay window is needed, and the peer is charged for the probe before any signature is
// checked.

// Probe bounds.
const (
	// maxBeatBytes bounds one frame of the probe protocol: a heartbeat is about 600 bytes.
	maxBeatBytes = 8 << 10
	// probeTimeout bounds one probe, dial included, and one served probe.
	probeTimeout = 5 * time.Second
	// maxProbes bounds the probes this node runs at once, and maxServed those it answers at
	// once; a probe beyond either waits for the next check (or is reset).
	maxProbes = 16
	maxServed = 64
)

// probeProtocol is the stream protocol of the direct tier.
func (g *Gossip) probeProtocol() libp2pproto.ID { return libp2pproto.ID(g.cfg.prefix + "live") }

// Watch adds agentID, served by pid, to the watch set, or renews its watch: the node will
// probe it every interval and judge its silence on its own interval (docs/scale.md). The node
// calls it for every agent it exchanges a message with and every agent discovery returns.
func (g *Gossip) Watch(agentID string, pid peer.ID) {
	if agentID == g.b.AgentID() || pid == "" || pid == g.h.ID() {
		return
	}
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	g.live.Watch(agentID, pid, g.cfg.clock())
}

// Watching returns how many agents this node watches directly.
func (g *Gossip) Watching() int {
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	return g.live.WatchCount()
}

// probeDue starts a probe of every watched agent that is due, as many as free slots allow.
// The run goroutine calls it on every check.
func (g *Gossip) probeDue(now time.Time) {
	free := maxProbes - int(g.probing.Load())
	if free <= 0 {
		return
	}
	g.stateMu.Lock()
	due := g.live.Due(now, free)
	g.stateMu.Unlock()
	for _, p := range due {
		g.probing.Add(1)
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			defer g.probing.Add(-1)
			if err := g.probe(p); err != nil && g.ctx.Err() == nil {
				g.log.Debug("probe", "peer_agent", p.AgentID, "peer", p.PeerID, "err", err.Error())
			}
		}()
	}
}

// probe runs one probe of a watched agent. A failure teaches nothing: the agent's silence
// goes on counting, and the next probe goes out an interval later.
func (g *Gossip) probe(p Probe) error {
	ctx, cancel := context.WithTimeout(g.ctx, probeTimeout)
	defer cancel()
	raw, err := g.exchange(ctx, p.PeerID)
	if errors.Is(err, msmux.ErrNotSupported[libp2pproto.ID]{}) {
		g.stateMu.Lock()
		g.live.Unprobeable(p.AgentID, g.cfg.clock())
		g.stateMu.Unlock()
		return fmt.Errorf("%s does not serve the probe protocol: judged by its mesh beats", p.PeerID)
	}
	if err != nil {
		return err
	}
	return g.takeDirect(ctx, raw, p.PeerID)
}

// exchange sends pid this node's last signed beat over the probe protocol and returns pid's,
// within ctx's deadline (which it must have).
func (g *Gossip) exchange(ctx context.Context, pid peer.ID) ([]byte, error) {
	s, err := g.h.NewStream(ctx, pid, g.probeProtocol())
	if err != nil {
		return nil, err
	}
	defer s.Close()
	deadline, _ := ctx.Deadline()
	_ = s.SetDeadline(deadline)
	own, err := g.ownSealed()
	if err != nil {
		s.Reset()
		return nil, err
	}
	if err := protocol.WriteFrame(s, own); err != nil {
		s.Reset()
		return nil, err
	}
	_ = s.CloseWrite()
	raw, err := protocol.ReadFrame(s, maxBeatBytes)
	if err != nil {
		s.Reset()
		return nil, err
	}
	return raw, nil
}

// serveProbe answers one probe: it reads the prober's beat, takes it, and answers with this
// node's own. The prober is charged to its rate before anything else.
func (g *Gossip) serveProbe(s network.Stream) {
	if !g.enterServe(s) {
		s.Reset()
		return
	}
	defer g.leaveServe(s)
	remote := s.Conn().RemotePeer()
	if !g.limiter.allow(remote, g.cfg.clock()) {
		s.Reset()
		return
	}
	_ = s.SetDeadline(time.Now().Add(probeTimeout))
	raw, err := protocol.ReadFrame(s, maxBeatBytes)
	if err != nil {
		s.Reset()
		return
	}
	ctx, cancel := context.WithTimeout(g.ctx, probeTimeout)
	defer cancel()
	if err := g.takeDirect(ctx, raw, remote); err != nil {
		g.log.Debug("probe refused", "peer", remote, "err", err.Error())
	}
	own, err := g.ownSealed()
	if err != nil {
		s.Reset()
		return
	}
	if err := protocol.WriteFrame(s, own); err != nil {
		s.Reset()
		return
	}
	_ = s.Close()
}

// enterServe admits one served probe unless Close began or maxServed run already; the
// stream is tracked so that Close can reset it.
func (g *Gossip) enterServe(s network.Stream) bool {
	g.serveMu.Lock()
	defer g.serveMu.Unlock()
	if g.serveClosed || len(g.served) >= maxServed {
		return false
	}
	g.served[s] = struct{}{}
	g.wg.Add(1)
	return true
}

func (g *Gossip) leaveServe(s network.Stream) {
	g.serveMu.Lock()
	delete(g.served, s)
	g.serveMu.Unlock()
	g.wg.Done()
}

// stopServing refuses new probes and resets the streams of those being served. The handler
// stays registered, resetting every probe, until the host closes (or a new Gossip replaces
// it): a node that is shutting down must look silent to its watchers, not like a node that
// does not serve the probe protocol, which they would judge by its mesh beats.
func (g *Gossip) stopServing() {
	g.serveMu.Lock()
	defer g.serveMu.Unlock()
	g.serveClosed = true
	for s := range g.served {
		s.Reset()
	}
}

// takeDirect checks a beat received over the probe protocol from remote, as a heartbeat of
// the topic is checked (except the replay window: only remote can have signed it), and
// records it.
func (g *Gossip) takeDirect(ctx context.Context, raw []byte, remote peer.ID) error {
	doc, err := protocol.DecodeJSON(raw)
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	_, author, err := g.cfg.verifier.SenderKey(doc)
	if err != nil || author != remote {
		return fmt.Errorf("sender.peer_id %q is not the probe's peer %s", doc.Envelope.Sender.PeerID, remote)
	}
	now := g.cfg.clock()
	if err := protocol.Validate(doc, now, len(raw), protocol.Limits{MaxMessageBytes: maxBeatBytes, MaxTTL: MaxGossipTTL}); err != nil {
		return fmt.Errorf("validate: %w", err)
	}
	info := topicInfo{name: string(g.probeProtocol()), kind: kindHeartbeat}
	v := &validated{doc: doc}
	if err := g.checkTopic(info, v); err != nil {
		return err
	}
	if err := g.authentic(ctx, info, v, author, author); err != nil {
		return err
	}
	g.deliver(info, author, author, v)
	return nil
}
