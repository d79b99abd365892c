package discovery

import (
	"context"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Status is a snapshot of the node's place in the mesh, for `iacp-node peers` and health checks.
type Status struct {
	// Mode is "server" or "client".
	Mode string
	// Bootstrapped is true once a bootstrap round reached at least one peer (or none were
	// configured and the routing table is not empty).
	Bootstrapped bool
	// BootstrapConfigured and BootstrapAnswered count the configured bootstrap peers and those
	// connected after the last round.
	BootstrapConfigured int
	BootstrapAnswered   int
	// BootstrapPeers tells, per configured peer, whether it answered and its last error.
	BootstrapPeers []BootstrapPeerStatus
	// Rounds counts bootstrap rounds; FailedRounds those in which no peer answered in a row.
	Rounds       int
	FailedRounds int
	// NextRound is when the bootstrap loop next tries, zero when not scheduled.
	NextRound time.Time
	// RoutingTableSize is the number of peers in the DHT routing table.
	RoutingTableSize int
	// LastError is the last bootstrap or publish error ("" when none) and when it happened.
	LastError   string
	LastErrorAt time.Time
	// AgentID, Seq and Published describe the local agent record ("" when none); Left is true
	// after Leave.
	AgentID   string
	Seq       uint64
	Published time.Time
	Left      bool
	// CachedAgents is the number of agents in the directory cache.
	CachedAgents int
}

// BootstrapPeerStatus is one configured bootstrap peer.
type BootstrapPeerStatus struct {
	Peer      peer.AddrInfo
	Answered  bool
	LastError string
	LastTry   time.Time
}

// bootState is guarded by Discovery.mu.
type bootState struct {
	peers        []BootstrapPeerStatus
	bootstrapped bool
	rounds       int
	failed       int
	answered     int
	next         time.Time
	lastErr      string
	lastErrAt    time.Time
	left         bool
}

// Status returns a snapshot.
func (d *Discovery) Status() Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := Status{
		Mode: "server", Bootstrapped: d.boot.bootstrapped,
		BootstrapConfigured: len(d.boot.peers), BootstrapAnswered: d.boot.answered,
		BootstrapPeers: append([]BootstrapPeerStatus(nil), d.boot.peers...),
		Rounds:         d.boot.rounds, FailedRounds: d.boot.failed, NextRound: d.boot.next,
		RoutingTableSize: d.dht.RoutingTable().Size(),
		LastError:        d.boot.lastErr, LastErrorAt: d.boot.lastErrAt,
		Left: d.boot.left, CachedAgents: d.cache.len(),
	}
	if d.cfg.client {
		s.Mode = "client"
	}
	if len(d.boot.peers) == 0 && s.RoutingTableSize > 0 {
		// the first node of a mesh has no bootstrap peers: it is joined once anyone joined it.
		s.Bootstrapped = true
	}
	if d.local != nil {
		s.AgentID, s.Seq, s.Published = d.local.manifest.AgentID, d.local.seq, d.local.published
	}
	return s
}

func (d *Discovery) setError(err error) {
	d.mu.Lock()
	d.boot.lastErr, d.boot.lastErrAt = err.Error(), d.cfg.now()
	d.mu.Unlock()
}

// rejoinBelow is the routing-table size under which a joined node dials its bootstrap peers
// again (kad-dht's own low-peers threshold). Above it the node leaves them alone: in a mesh of
// thousands, every node re-dialling every bootstrap peer each health interval would hand each
// of them thousands of connections a minute, which their connection managers then trim.
const rejoinBelow = 10

// foundingPoll is how often the first node of a mesh, which has no bootstrap peers, checks
// whether anyone has joined it.
const foundingPoll = time.Second

// bootstrapLoop joins the mesh and keeps it joined: rounds that reach no bootstrap peer are
// retried with backoff; once joined, every health interval it retries the bootstrap peers that
// are not connected while its routing table is small (rejoinBelow) and, if the routing table
// has emptied, goes back to backoff rounds.
func (d *Discovery) bootstrapLoop() {
	failed := 0
	for {
		var answered, configured int
		if !d.joined() || d.dht.RoutingTable().Size() < rejoinBelow {
			answered, configured = d.bootstrapRound()
		}
		var wait time.Duration
		switch {
		case configured == 0 && d.dht.RoutingTable().Size() == 0:
			// The first node of a mesh waits to be joined; it looks every second, so that it
			// publishes its record as soon as the first peer arrives rather than a health
			// interval later (a routing-table size is all it reads).
			wait = min(foundingPoll, d.cfg.healthInterval)
		case answered == 0 && d.dht.RoutingTable().Size() == 0:
			failed++
			wait = d.cfg.backoff.Delay(failed, d.rand.Int64N)
			d.log.Warn("no bootstrap peer answered; the node is not joined to the mesh and keeps trying",
				"configured", configured, "failed_rounds", failed, "retry_in", wait.String())
		default:
			// Refresh the routing table once, right after a (re)join; afterwards kad-dht's own
			// periodic refresh keeps it fresh. Refreshing at every health check would walk the
			// DHT once per bucket on every node every interval.
			justJoined := failed > 0 || !d.joined()
			if justJoined {
				d.log.Info("joined the mesh", "bootstrap_answered", answered, "configured", configured,
					"routing_table", d.dht.RoutingTable().Size())
			}
			failed = 0
			d.markJoined()
			if justJoined {
				// Publish after the refresh, so that the record goes to the peers closest
				// to its keys rather than to the few the node knew on joining.
				d.refreshRoutingTable()
			}
			d.maybeStale(d.dht.RoutingTable().Size())
			d.kickRepublish()
			wait = d.cfg.healthInterval
		}
		d.mu.Lock()
		d.boot.failed = failed
		d.boot.next = d.cfg.now().Add(wait)
		d.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-d.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (d *Discovery) joined() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.boot.bootstrapped
}

// markJoined records the join and clears the failure count in one update, so that Status
// never shows a joined node with failed rounds.
func (d *Discovery) markJoined() {
	d.mu.Lock()
	d.boot.bootstrapped = true
	d.boot.failed = 0
	d.mu.Unlock()
}

// bootstrapRound dials, in parallel, every configured bootstrap peer that is not connected, and
// records who answered. It returns how many are connected after the round.
func (d *Discovery) bootstrapRound() (answered, configured int) {
	d.mu.Lock()
	peers := append([]BootstrapPeerStatus(nil), d.boot.peers...)
	d.mu.Unlock()
	var wg sync.WaitGroup
	for i := range peers {
		p := &peers[i]
		if d.h.Network().Connectedness(p.Peer.ID) == network.Connected {
			p.Answered, p.LastError = true, ""
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(d.ctx, d.cfg.connectTimeout)
			defer cancel()
			p.LastTry = d.cfg.now()
			if err := d.h.Connect(ctx, p.Peer); err != nil {
				p.Answered, p.LastError = false, err.Error()
				if d.ctx.Err() == nil {
					d.log.Warn("bootstrap peer did not answer; will retry", "bootstrap_peer", p.Peer.ID.String(),
						"addrs", p.Peer.Addrs, "err", err)
				}
				return
			}
			p.Answered, p.LastError = true, ""
			d.log.Info("bootstrap peer answered", "bootstrap_peer", p.Peer.ID.String())
		})
	}
	wg.Wait()
	var lastErr string
	for _, p := range peers {
		if p.Answered {
			answered++
		} else if p.LastError != "" {
			lastErr = "bootstrap peer " + p.Peer.ID.String() + ": " + p.LastError
		}
	}
	d.mu.Lock()
	d.boot.peers = peers
	d.boot.rounds++
	d.boot.answered = answered
	if lastErr != "" {
		d.boot.lastErr, d.boot.lastErrAt = lastErr, d.cfg.now()
	}
	d.mu.Unlock()
	return answered, len(peers)
}

// refreshRoutingTable asks the DHT to refresh its routing table and waits for the outcome (or
// Close). Refresh errors are logged, not fatal: the DHT refreshes on its own schedule too.
func (d *Discovery) refreshRoutingTable() {
	select {
	case err := <-d.dht.RefreshRoutingTable():
		if err != nil && d.ctx.Err() == nil {
			d.log.Debug("routing table refresh incomplete", "err", err)
		}
	case <-d.ctx.Done():
	}
}
