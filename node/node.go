package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/iacp-node/iacp-node/dialect"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/trust"
)

// ProtocolID is the libp2p protocol of direct IACP messaging.
const ProtocolID = "/iacp/1.0.0"

// KeyFile is the identity key's name inside the data directory.
const KeyFile = "identity.key"

// idleWorkers is how many handler goroutines stay parked after their message, so that the next
// message's handler runs on a stack already grown (internal/workers).
const idleWorkers = 8

// maxHandlers bounds the handler goroutines running at once; beyond it new messages are
// refused with RATE_LIMITED so that a flood cannot grow the node without bound.
const maxHandlers = 1024

// Node is one agent's IACP node. Its mutable state is split by owner: handlers under
// handlersMu, outbound waiters under waitersMu, sessions under sessionsMu, resolvers and
// needed peers under dirMu; the agent directory, the trust pins, the rate limiter and the
// queue budget guard themselves; what outlives an exchange (the store, the delivery engine,
// the gossip journal, the audit log) belongs to the durable part, discovery, gossip and the
// broadcast queries to the mesh part (meshPart); everything else is set in New and read-only
// after. docs/architecture.md draws the whole.
type Node struct {
	cfg     Config
	host    host.Host
	key     crypto.PrivKey
	builder *protocol.Builder
	log     *slog.Logger
	now     func() time.Time
	trust   *trust.Trust // who may speak for which agent id, in either mode; set in start
	wire    *wire        // the message path over /iacp/1.0.0 (wire.go)
	peers   *peers       // where agents are, and the peers kept connected (peers.go)
	started time.Time
	status  atomic.Pointer[protocol.HeartbeatPayload]
	inbox   *Inbox
	// mesh is discovery, gossip and the broadcast queries over them (mesh.go).
	mesh *meshPart
	// durable is the store, the delivery engine, the gossip journal and the audit log
	// (durable.go): set in start, with do-nothing parts for what is off.
	durable *durable
	// approvals are the events and hand-overs of messages held for approval (approval.go).
	approvals *approvals

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup // background loops and session readers
	life      lifecycle      // the exchanges in flight and the gate Close shuts (lifecycle.go)
	closeOnce sync.Once
	closeErr  error
}

// Resolver finds the peer that serves an agent id; discovery plugs in here.
type Resolver interface {
	// ResolveAgent returns the peer and addresses of agentID, or an error wrapping
	// protocol.ErrAgentNotFound.
	ResolveAgent(ctx context.Context, agentID string) (peer.AddrInfo, error)
}

// CachingResolver is a Resolver that caches its answers, as discovery does. When the peer it
// gave for an agent cannot be reached, the node tells it, and resolves the agent once more:
// the agent may have moved, or reserved a relay, since the answer was cached.
type CachingResolver interface {
	Resolver
	// Unreachable reports that p, given for agentID by a resolve begun at since (on the
	// node's Clock), could not be reached. It drops what it cached of the agent before since
	// if that names p, and reports whether it did: an answer it looked up for that resolve is
	// the mesh's latest, and asking again would give it again.
	Unreachable(agentID string, p peer.ID, since time.Time) bool
}

// New builds and starts a node. It loads the identity key from the data directory (creating it
// with mode 0600 on first start) unless one is given, builds the libp2p host unless one is
// given, and registers /iacp/1.0.0. A New that fails halfway closes what it built.
func New(opts ...Option) (_ *Node, err error) {
	cfg, key, err := configure(opts)
	if err != nil {
		return nil, err
	}
	b, err := protocol.NewBuilder(cfg.AgentID, key, cfg.Clock)
	if err != nil {
		return nil, err
	}
	b = b.WithDefaultTTL(cfg.DefaultTTL)
	h, paths := cfg.Host, newPathBook()
	if h == nil {
		if h, err = newHost(&cfg, key, paths); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			h.Close()
		}
	}()
	if h.ID() != b.PeerID() {
		return nil, fmt.Errorf("host peer id %s does not match the identity key's %s", h.ID(), b.PeerID())
	}
	n, err := newNode(cfg, key, h, b)
	if err != nil {
		return nil, err
	}
	n.peers.paths = paths
	if err := n.start(); err != nil {
		return nil, err
	}
	n.log.Info("node started", "addrs", n.Addrs())
	return n, nil
}

// Close stops the node: it refuses new streams, lets in-flight exchanges finish for up to
// ShutdownGrace, then stops every goroutine it started and closes the host. It is safe to call
// more than once; later calls return the first call's result.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.life.beginClose()
		leaveCtx, cancelLeave := context.WithTimeout(context.Background(), n.cfg.ShutdownGrace)
		n.mesh.leave(leaveCtx)
		cancelLeave()
		n.host.RemoveStreamHandler(ProtocolID) // trust's protocols refuse new streams (tracked)
		// Outbound sessions end and idle inbound streams stop waiting for frames; exchanges
		// already in progress (handlers, receipt windows) get ShutdownGrace to finish.
		n.wire.sessionsMu.Lock()
		open := make([]*session, 0, len(n.wire.sessions))
		for _, s := range n.wire.sessions {
			open = append(open, s)
		}
		for in := range n.wire.inbound {
			_ = in.s.CloseRead() // frames not yet read get no receipt: their senders retry
		}
		n.wire.sessionsMu.Unlock()
		for _, s := range open {
			s.end(errors.New("node closed"), false)
		}
		drained := make(chan struct{})
		go func() { n.life.inflight.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(n.cfg.ShutdownGrace):
			n.log.Warn("shutdown grace passed with exchanges in flight; closing anyway")
		}
		n.life.stop()
		n.cancel()
		n.closeErr = errors.Join(n.mesh.close(), n.host.Close())
		<-drained
		n.wire.workers.Close() // no handler runs or starts once the exchanges drained
		n.wg.Wait()
		n.closeErr = errors.Join(n.closeErr, n.durable.close(), n.trust.Close())
	})
	return n.closeErr
}

// abandon undoes a New that failed after the protocol was served: no new streams, the
// streams in progress ended and waited for, so that the store can be closed under nothing.
func (n *Node) abandon() {
	n.life.beginClose()
	n.host.RemoveStreamHandler(ProtocolID)
	n.wire.sessionsMu.Lock()
	for in := range n.wire.inbound {
		_ = in.s.Reset()
	}
	n.wire.sessionsMu.Unlock()
	n.cancel()
	n.life.inflight.Wait()
	n.wire.workers.Close()
}

// ID returns the node's peer id.
func (n *Node) ID() peer.ID { return n.host.ID() }

// AgentID returns the agent this node serves.
func (n *Node) AgentID() string { return n.cfg.AgentID }

// Dialect returns the draft the agent speaks (Config.Dialect): the local API hands it
// messages, and reads its answers, in it.
func (n *Node) Dialect() dialect.Dialect {
	d, _ := dialect.Parse(n.cfg.Dialect) // Validate checked it
	return d
}

// Builder returns the builder that signs as this node's agent.
func (n *Node) Builder() *protocol.Builder { return n.builder }

// Manifest returns the agent's capability manifest, with uptime filled in.
func (n *Node) Manifest() protocol.Manifest {
	m := n.cfg.Manifest
	m.UptimeSeconds = int64(n.now().Sub(n.started) / time.Second)
	return m
}

// Config returns the configuration the node runs with.
func (n *Node) Config() Config { return n.cfg }

// Logger returns the node's logger, tagged with its agent and peer ids.
func (n *Node) Logger() *slog.Logger { return n.log }

// Now returns the node's clock reading.
func (n *Node) Now() time.Time { return n.now() }

// Addrs returns the full multiaddrs (with /p2p/) the node listens on.
func (n *Node) Addrs() []ma.Multiaddr {
	full, _ := peer.AddrInfoToP2pAddrs(&peer.AddrInfo{ID: n.host.ID(), Addrs: n.host.Addrs()})
	return full
}

// SetStatus sets what health requests and heartbeats report: alive, busy, draining or
// offline, a load from 0 to 1, and the number of active tasks.
func (n *Node) SetStatus(status string, load float64, activeTasks int) error {
	hb := protocol.HeartbeatPayload{Status: status, Load: load, ActiveTasks: activeTasks, Version: n.cfg.AgentVersion}
	switch status {
	case protocol.StatusAlive, protocol.StatusBusy, protocol.StatusDraining, protocol.StatusOffline:
	default:
		return fmt.Errorf("status %q is not alive, busy, draining or offline", status)
	}
	if load < 0 || load > 1 || activeTasks < 0 {
		return fmt.Errorf("load must be 0 to 1 and active tasks not negative")
	}
	n.status.Store(&hb)
	return n.mesh.gossip().SetStatus(status, load, activeTasks)
}

// Status returns the current status.
func (n *Node) Status() protocol.HeartbeatPayload { return *n.status.Load() }

// Inbox returns the inbox: inbound messages that no Go handler took, held until the agent
// acknowledges them.
func (n *Node) Inbox() *Inbox { return n.inbox }

// AddResolver adds a way to find agents the node has never heard from (discovery).
func (n *Node) AddResolver(r Resolver) { n.peers.addResolver(r) }

// AddPeer tells the node where an agent lives, and keeps the node connected to it.
func (n *Node) AddPeer(agentID string, ai peer.AddrInfo) { n.peers.add(agentID, ai) }

// ParseBootstrap parses a multiaddr that ends in /p2p/<peer id>.
func ParseBootstrap(s string) (peer.AddrInfo, error) {
	a, err := ma.NewMultiaddr(s)
	if err != nil {
		return peer.AddrInfo{}, fmt.Errorf("bootstrap %q: %w", s, err)
	}
	ai, err := peer.AddrInfoFromP2pAddr(a)
	if err != nil {
		return peer.AddrInfo{}, fmt.Errorf("bootstrap %q must end in /p2p/<peer id>: %w", s, err)
	}
	return *ai, nil
}
