package node

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"

	"github.com/iacp-node/iacp-node/internal/retry"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/trust"
)

// peers is the part that knows where agents are and keeps the peers the node needs
// connected: the agent directory (an LRU with its own lock), the resolvers and the needed
// peers with their reconnect schedules (mu), the bootstrap peers (set in New, read-only
// after) and the paths of connections (hole punches). Its turns run on the node's maintain
// loop.
type peers struct {
	host  host.Host
	trust *trust.Trust
	log   *slog.Logger
	// reconnectMin and reconnectMax bound a needed peer's redial backoff; attempt bounds a
	// dial or a ping.
	reconnectMin, reconnectMax, attempt time.Duration

	// directory maps agent ids to the peers that serve them, learned from accepted messages,
	// heartbeats, resolutions and AddPeer; bounded by max_agents, the least recently used
	// entry goes first (it is resolved again when needed).
	directory *lru.Cache[string, peer.ID]
	bootstrap []peer.AddrInfo // the configured bootstrap peers, one entry each, the node left out (discovery.MergePeers)
	paths     *pathBook       // hole-punched connections and punch counts (paths.go)

	mu        sync.RWMutex
	resolvers []Resolver
	needed    map[peer.ID]*backoff
	jitter    *retry.Jitter // the redials' jitter, from Config.Seed
}

// backoff is the reconnect schedule of one needed peer (peers.mu).
type backoff struct {
	attempts int
	next     time.Time
}

func newPeers(cfg Config, h host.Host, log *slog.Logger) (*peers, error) {
	directory, err := lru.New[string, peer.ID](cfg.MaxAgents)
	if err != nil {
		return nil, err
	}
	return &peers{host: h, log: log, reconnectMin: cfg.ReconnectMin, reconnectMax: cfg.ReconnectMax, attempt: cfg.FrameTimeout, jitter: retry.NewJitter(cfg.Seed, 4),
		directory: directory, paths: newPathBook(), needed: make(map[peer.ID]*backoff)}, nil
}

// addResolver adds a way to find an agent's peer (discovery plugs in here).
func (ps *peers) addResolver(r Resolver) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.resolvers = append(ps.resolvers, r)
}

// add records where an agent lives and keeps its peer connected.
func (ps *peers) add(agentID string, ai peer.AddrInfo) {
	ps.host.Peerstore().AddAddrs(ai.ID, ai.Addrs, time.Hour)
	ps.directory.Add(agentID, ai.ID)
	ps.need(ai.ID)
}

// need keeps p connected from now on.
func (ps *peers) need(p peer.ID) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if _, ok := ps.needed[p]; !ok {
		ps.needed[p] = &backoff{}
	}
}

// learn records in the directory that p serves agentID.
func (ps *peers) learn(agentID string, p peer.ID) {
	if q, ok := ps.directory.Get(agentID); !ok || q != p {
		ps.directory.Add(agentID, p)
	}
}

// bind records what an accepted message proves: p speaks for agentID. It pins the id to p
// (trust on first use) and learns where the agent is. Only messages that passed every check
// and were accepted, or taken as the reply a waiter expected, are bound.
func (ps *peers) bind(agentID string, p peer.ID) {
	ps.trust.Bind(agentID, p)
	ps.learn(agentID, p)
}

// forget drops what the directory holds of agentID, or of every agent at p when agentID is
// "".
func (ps *peers) forget(agentID string, p peer.ID) {
	if agentID != "" {
		ps.directory.Remove(agentID)
		return
	}
	for _, a := range ps.directory.Keys() {
		if q, ok := ps.directory.Peek(a); ok && q == p {
			ps.directory.Remove(a)
		}
	}
}

// resolve finds the peer serving agentID: the directory or trust pins when the node is
// connected to the peer they name, else the resolvers (which also give its current
// addresses), else the peer they name.
func (ps *peers) resolve(ctx context.Context, agentID string) (peer.ID, error) {
	if protocol.IsWildcard(agentID) {
		return "", protocol.Errorf(protocol.CodePayloadInvalid, "recipient %q is a wildcard: direct messages need one agent; use a broadcast", agentID)
	}
	p, ok := ps.directory.Get(agentID)
	ps.mu.RLock()
	resolvers := ps.resolvers
	ps.mu.RUnlock()
	if !ok {
		p, ok = ps.trust.PeerOf(agentID)
	}
	if ok && (ps.host.Network().Connectedness(p) == network.Connected || len(resolvers) == 0) {
		return p, nil
	}
	// Known but not connected: the resolvers say where the agent is now (a node that moved,
	// or reserved another relay, republished its record), and the addresses join those the
	// peerstore has; if none answers, the dial tries what is known.
	var errs []error
	for _, r := range resolvers {
		ai, err := r.ResolveAgent(ctx, agentID)
		if err == nil {
			ps.host.Peerstore().AddAddrs(ai.ID, ai.Addrs, time.Hour)
			ps.learn(agentID, ai.ID)
			return ai.ID, nil
		}
		errs = append(errs, err)
	}
	if ok {
		return p, nil
	}
	if unknownAfter(errs) {
		errs = append(errs, errUnknown)
	}
	return "", &protocol.Error{Code: protocol.CodeAgentNotFound, Message: "no peer known for agent " + agentID, Err: errors.Join(errs...)}
}

// unreachable tells the caching resolvers that p, where agentID resolved in a resolve begun at
// since, could not be reached, and reports whether any dropped an answer cached before it
// (then resolve asks the mesh again).
func (ps *peers) unreachable(agentID string, p peer.ID, since time.Time) bool {
	ps.mu.RLock()
	resolvers := ps.resolvers
	ps.mu.RUnlock()
	dropped := false
	for _, r := range resolvers {
		if c, ok := r.(CachingResolver); ok && c.Unreachable(agentID, p, since) {
			dropped = true
		}
	}
	return dropped
}

// neededPeers lists the peers the node keeps connected (need).
func (ps *peers) neededPeers() []peer.ID {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	out := make([]peer.ID, 0, len(ps.needed))
	for p := range ps.needed {
		out = append(out, p)
	}
	return out
}

// reconnect dials every needed peer that is not connected and whose backoff has passed
// (IaCP 1.0 section 5.3.2), and protects their connections from the connection manager.
func (ps *peers) reconnect(ctx context.Context, now time.Time) {
	for _, p := range ps.neededPeers() {
		ps.host.ConnManager().Protect(p, "iacp-needed")
		if ps.host.Network().Connectedness(p) == network.Connected {
			ps.mu.Lock()
			ps.needed[p].attempts = 0
			ps.mu.Unlock()
			continue
		}
		ps.mu.RLock()
		due := !now.Before(ps.needed[p].next)
		ps.mu.RUnlock()
		if due {
			ps.redial(ctx, p, now)
		}
	}
}

// redial dials the needed peer p once, and sets its next attempt.
func (ps *peers) redial(ctx context.Context, p peer.ID, now time.Time) {
	dctx, cancel := context.WithTimeout(ctx, ps.attempt)
	err := ps.host.Connect(dctx, peer.AddrInfo{ID: p})
	cancel()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	b := ps.needed[p]
	if err != nil {
		b.attempts++
		// reconnectMin doubled per failed dial, capped at reconnectMax, with jitter so that
		// nodes that lost the same peer do not redial it in lockstep.
		wait := retry.Backoff{Min: ps.reconnectMin, Max: ps.reconnectMax}.Delay(b.attempts, ps.jitter.Int64N)
		b.next = now.Add(wait)
		ps.log.Warn("peer unreachable; will retry", "peer", p.ShortString(), "attempt", b.attempts, "retry_in", wait.Round(time.Millisecond), "err", err.Error())
		return
	}
	if b.attempts > 0 {
		ps.log.Info("peer reconnected", "peer", p.ShortString(), "after_attempts", b.attempts)
	}
	b.attempts = 0
}

// keepAlive pings every connected needed peer once; the round trip also feeds the
// peerstore's latency estimate.
func (ps *peers) keepAlive(ctx context.Context) {
	for _, p := range ps.neededPeers() {
		if ps.host.Network().Connectedness(p) != network.Connected {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, ps.attempt)
		select {
		case res := <-ping.Ping(pctx, ps.host, p):
			if res.Error != nil {
				ps.log.Debug("keep-alive ping failed", "peer", p.ShortString(), "err", res.Error.Error())
			}
		case <-pctx.Done():
		}
		cancel()
	}
}

// bootstrapIDs returns the bootstrap peers, one entry each and never the node: those trust
// asks for the mesh authority when authority_node is not set.
func (ps *peers) bootstrapIDs() []peer.ID {
	out := make([]peer.ID, 0, len(ps.bootstrap))
	for _, ai := range ps.bootstrap {
		out = append(out, ai.ID)
	}
	return out
}
