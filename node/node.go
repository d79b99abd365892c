package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/delivery"
	"github.com/iacp-node/iacp-node/dialect"
	"github.com/iacp-node/iacp-node/discovery"
	"github.com/iacp-node/iacp-node/internal/quietlog"
	"github.com/iacp-node/iacp-node/internal/retry"
	"github.com/iacp-node/iacp-node/internal/workers"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
	"github.com/iacp-node/iacp-node/store"
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
// queue budget guard themselves; durable delivery's claims and retries belong to its engine
// (delivery.Engine), discovery and gossip to their own types; everything else is set in New
// and read-only after. docs/architecture.md draws the whole.
type Node struct {
	cfg      Config
	host     host.Host
	key      crypto.PrivKey
	builder  *protocol.Builder
	log      *slog.Logger
	now      func() time.Time
	limits   protocol.Limits
	replay   *protocol.ReplayWindow
	trust    *trustStore
	certs    *certBook             // authority mode's verified certificates; nil in open mode
	invites  *authority.InviteBook // the mesh authority's node only (with a data directory)
	registry *authority.Registry   // the mesh authority's node only (with a data directory)
	tokens   *authority.Verifier   // A2ACP tokens; nil in open mode without token_issuers
	rate     *rateLimiter
	budget   *queueBudget
	large    chan struct{} // the slot of the large frame being served (holdLarge)
	audits   *refusalAudit
	quiet    *quietlog.Logger // what peers make the node refuse: a log line per peer per interval
	journal  *gossipJournal
	policy   policy
	started  time.Time
	slots    chan struct{} // handler concurrency
	workers  *workers.Pool // the goroutines Go handlers run on (at most idleWorkers parked)
	paths    *pathBook     // hole-punched connections and punch counts (paths.go)

	handlersMu sync.RWMutex
	handlers   map[protocol.Intent]Handler
	fallback   Handler

	waitersMu sync.Mutex
	waiters   map[string]*waiter
	asks      askBook  // broadcast queries (ask.go)
	answered  answered // answers to recent requests, for their resends (answered.go)

	sessionsMu sync.Mutex
	sessions   map[peer.ID]*session
	inbound    map[*inStream]struct{}

	// directory maps agent ids to the peers that serve them, learned from accepted messages,
	// heartbeats, resolutions and AddPeer; bounded by max_agents, the least recently used
	// entry goes first (it is resolved again when needed).
	directory *lru.Cache[string, peer.ID]

	dirMu     sync.RWMutex
	resolvers []Resolver
	needed    map[peer.ID]*backoff
	jitter    *retry.Jitter   // the redials' jitter, from Config.Seed
	bootstrap []peer.AddrInfo // the configured bootstrap peers, one entry each, the node left out (discovery.MergePeers)

	status atomic.Pointer[protocol.HeartbeatPayload]
	inbox  *Inbox
	disc   *discovery.Discovery // nil when off
	gossip *pubsub.Gossip       // nil when off
	// watcher is gossip for watch, which streams served before startMesh sets gossip call
	// (inbound messages, and the delivery engine's retries): nil until then, and when off.
	watcher atomic.Pointer[pubsub.Gossip]
	store   *store.Store     // nil when durability is off
	audit   *audit.Log       // nil when the audit log is off
	engine  *delivery.Engine // nil when durability is off
	// approvals are the events and hand-overs of messages held for approval (approval.go).
	approvals *approvalBook

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup // background loops and session readers
	inflight  sync.WaitGroup // inbound streams and handlers, drained on Close
	gate      sync.RWMutex   // orders inflight.Add and wg.Add against Close
	closing   bool           // guarded by gate: no new exchanges
	stopped   bool           // guarded by gate: no new background goroutines
	closeOnce sync.Once
	closeErr  error
}

// Resolver finds the peer that serves an agent id; discovery plugs in here.
type Resolver interface {
	// ResolveAgent returns the peer and addresses of agentID, or an error wrapping
	// protocol.ErrAgentNotFound.
	ResolveAgent(ctx context.Context, agentID string) (peer.AddrInfo, error)
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
	n.paths = paths
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
		n.gate.Lock()
		n.closing = true
		n.gate.Unlock()
		leaveCtx, cancelLeave := context.WithTimeout(context.Background(), n.cfg.ShutdownGrace)
		n.leaveMesh(leaveCtx)
		cancelLeave()
		n.host.RemoveStreamHandler(ProtocolID)
		n.host.RemoveStreamHandler(CertProtocolID)
		n.host.RemoveStreamHandler(JoinProtocolID)
		n.host.RemoveStreamHandler(AuthorityProtocolID)
		// Outbound sessions end and idle inbound streams stop waiting for frames; exchanges
		// already in progress (handlers, receipt windows) get ShutdownGrace to finish.
		n.sessionsMu.Lock()
		open := make([]*session, 0, len(n.sessions))
		for _, s := range n.sessions {
			open = append(open, s)
		}
		for in := range n.inbound {
			_ = in.s.CloseRead() // frames not yet read get no receipt: their senders retry
		}
		n.sessionsMu.Unlock()
		for _, s := range open {
			s.end(errors.New("node closed"), false)
		}
		drained := make(chan struct{})
		go func() { n.inflight.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(n.cfg.ShutdownGrace):
			n.log.Warn("shutdown grace passed with exchanges in flight; closing anyway")
		}
		n.gate.Lock()
		n.stopped = true
		n.gate.Unlock()
		n.cancel()
		n.closeErr = errors.Join(n.closeMesh(), n.host.Close())
		<-drained
		n.workers.Close() // no handler runs or starts once the exchanges drained
		n.wg.Wait()
		n.closeErr = errors.Join(n.closeErr, n.closeDurable(), n.trust.flush())
	})
	return n.closeErr
}

// abandon undoes a New that failed after the protocol was served: no new streams, the
// streams in progress ended and waited for, so that the store can be closed under nothing.
func (n *Node) abandon() {
	n.gate.Lock()
	n.closing = true
	n.gate.Unlock()
	n.host.RemoveStreamHandler(ProtocolID)
	n.sessionsMu.Lock()
	for in := range n.inbound {
		_ = in.s.Reset()
	}
	n.sessionsMu.Unlock()
	n.cancel()
	n.inflight.Wait()
	n.workers.Close()
}

// track counts one in-flight exchange, or returns false once Close has begun.
func (n *Node) track() bool {
	n.gate.RLock()
	defer n.gate.RUnlock()
	if n.closing {
		return false
	}
	n.inflight.Add(1)
	return true
}

// spawn runs f on a goroutine that Close waits for, unless Close has got past its drain;
// then it returns false and f does not run.
func (n *Node) spawn(f func()) bool {
	n.gate.RLock()
	defer n.gate.RUnlock()
	if n.stopped {
		return false
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
	return true
}

func (n *Node) isClosing() bool {
	n.gate.RLock()
	defer n.gate.RUnlock()
	return n.closing
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
	if n.gossip != nil {
		return n.gossip.SetStatus(status, load, activeTasks)
	}
	return nil
}

// Status returns the current status.
func (n *Node) Status() protocol.HeartbeatPayload { return *n.status.Load() }

// Inbox returns the inbox: inbound messages that no Go handler took, held until the agent
// acknowledges them.
func (n *Node) Inbox() *Inbox { return n.inbox }

// AddResolver adds a way to find agents the node has never heard from (discovery).
func (n *Node) AddResolver(r Resolver) {
	n.dirMu.Lock()
	defer n.dirMu.Unlock()
	n.resolvers = append(n.resolvers, r)
}

// AddPeer tells the node where an agent lives, and keeps the node connected to it.
func (n *Node) AddPeer(agentID string, ai peer.AddrInfo) {
	n.host.Peerstore().AddAddrs(ai.ID, ai.Addrs, time.Hour)
	n.directory.Add(agentID, ai.ID)
	n.dirMu.Lock()
	defer n.dirMu.Unlock()
	if _, ok := n.needed[ai.ID]; !ok {
		n.needed[ai.ID] = &backoff{}
	}
}

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

// learn records in the directory that p serves agentID.
func (n *Node) learn(agentID string, p peer.ID) {
	if q, ok := n.directory.Get(agentID); !ok || q != p {
		n.directory.Add(agentID, p)
	}
}

// bind records what an accepted message proves: p speaks for agentID. It pins the id to p
// (trust on first use) and learns where the agent is. Only messages that passed every check
// and were accepted, or taken as the reply a waiter expected, are bound.
func (n *Node) bind(agentID string, p peer.ID) {
	if n.certs == nil {
		n.trust.pin(agentID, p) // in authority mode the certificate is the binding
	}
	n.learn(agentID, p)
}

// resolve finds the peer serving agentID: the directory or trust pins when the node is
// connected to the peer they name, else the resolvers (which also give its current
// addresses), else the peer they name.
func (n *Node) resolve(ctx context.Context, agentID string) (peer.ID, error) {
	if protocol.IsWildcard(agentID) {
		return "", protocol.Errorf(protocol.CodePayloadInvalid, "recipient %q is a wildcard: direct messages need one agent; use a broadcast", agentID)
	}
	p, ok := n.directory.Get(agentID)
	n.dirMu.RLock()
	resolvers := n.resolvers
	n.dirMu.RUnlock()
	if !ok {
		p, ok = n.trust.peerOf(agentID)
	}
	if ok && (n.host.Network().Connectedness(p) == network.Connected || len(resolvers) == 0) {
		return p, nil
	}
	// Known but not connected: the resolvers say where the agent is now (a node that moved,
	// or reserved another relay, republished its record), and the addresses join those the
	// peerstore has; if none answers, the dial tries what is known.
	var errs []error
	for _, r := range resolvers {
		ai, err := r.ResolveAgent(ctx, agentID)
		if err == nil {
			n.host.Peerstore().AddAddrs(ai.ID, ai.Addrs, time.Hour)
			n.learn(agentID, ai.ID)
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
