package discovery

import (
	"context"
	"slices"
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
	// BootstrapConfigured and BootstrapAnswered count the configured bootstrap peers (a peer
	// listed with several addresses once) and those that answered (a round ends once two have,
	// or one if only one is configured; its other dials count as they end).
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

// BootstrapPeerStatus is one configured bootstrap peer: whether it was connected or answered
// its last dial (false while a dial is under way), the error of the last dial that failed
// (kept while the next one is under way, cleared when one answers), and when the last dial
// began.
type BootstrapPeerStatus struct {
	Peer      peer.AddrInfo
	Answered  bool
	LastError string
	LastTry   time.Time
}

// MergePeers returns list with one entry per peer, in the order of their first entries: a
// peer listed more than once (an address per transport, say) has all its addresses in its one
// entry, so that a bootstrap round's rule of two answers takes two peers, and whoever walks the
// list asks each peer once. self is left out. list is not modified.
func MergePeers(list []peer.AddrInfo, self peer.ID) []peer.AddrInfo {
	var out []peer.AddrInfo
	at := map[peer.ID]int{}
	for _, ai := range list {
		if ai.ID == self {
			continue
		}
		i, ok := at[ai.ID]
		if !ok {
			at[ai.ID] = len(out)
			out = append(out, peer.AddrInfo{ID: ai.ID, Addrs: slices.Clone(ai.Addrs)})
			continue
		}
		for _, a := range ai.Addrs {
			if !slices.ContainsFunc(out[i].Addrs, a.Equal) {
				out[i].Addrs = append(out[i].Addrs, a)
			}
		}
	}
	return out
}

// bootState is guarded by Discovery.mu.
type bootState struct {
	peers        []BootstrapPeerStatus
	dialing      []bool    // per peer: a dial of a round is still running
	dialed       chan bool // the outcome of each dial that ends, answered or not
	bootstrapped bool
	settled      bool // joined, and the routing table refreshed since (Discovery.settled)
	rounds       int
	failed       int
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
		BootstrapConfigured: len(d.boot.peers), BootstrapAnswered: d.countAnswered(),
		BootstrapPeers: append([]BootstrapPeerStatus(nil), d.boot.peers...),
		Rounds:         d.boot.rounds, FailedRounds: d.boot.failed, NextRound: d.boot.next,
		RoutingTableSize: d.dht.RoutingTable().Size(),
		LastError:        d.boot.lastErr, LastErrorAt: d.boot.lastErrAt,
		Left: d.boot.left, CachedAgents: d.cache.len(),
	}
	if !d.serving() {
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
			d.setSettled(false)
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
			if justJoined || !d.settled() {
				// Publish after the refresh, so that the record goes to the peers closest
				// to its keys rather than to the few the node knew on joining.
				d.refreshRoutingTable()
			}
			// A bootstrap peer can answer an instant before the DHT has it in the routing
			// table (identify has not told it the peer speaks the DHT): until the table
			// holds someone, a lookup's "not found" says nothing, and the loop looks again
			// soon.
			settled := d.dht.RoutingTable().Size() > 0
			d.setSettled(settled)
			d.maybeStale(d.placement())
			d.kickRepublish()
			wait = d.cfg.healthInterval
			if !settled {
				wait = min(foundingPoll, wait)
			}
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

// settled reports whether the node has joined and refreshed its routing table since, so that
// a DHT walk reaches the peers closest to its key rather than the few the node joined through.
// It is false again while a node that lost every peer rejoins.
func (d *Discovery) settled() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.boot.settled
}

// alone reports whether the node is a mesh of its own: no bootstrap peer configured, nobody
// in its routing table and no peer connected (the first node of a mesh, before anyone joins
// it; a peer that has just connected may not be in the routing table yet).
func (d *Discovery) alone() bool {
	d.mu.Lock()
	configured := len(d.boot.peers)
	d.mu.Unlock()
	return configured == 0 && d.dht.RoutingTable().Size() == 0 && len(d.h.Network().Peers()) == 0
}

func (d *Discovery) setSettled(v bool) {
	d.mu.Lock()
	d.boot.settled = v
	d.mu.Unlock()
}

// markJoined records the join and clears the failure count in one update, so that Status
// never shows a joined node with failed rounds.
func (d *Discovery) markJoined() {
	d.mu.Lock()
	d.boot.bootstrapped = true
	d.boot.failed = 0
	d.mu.Unlock()
}

// joinAnswers is how many bootstrap peers a round waits for, when that many are configured:
// kad-dht's own bootstrap waits for two, so that a mesh that restarts at once does not join
// through one peer and split.
const joinAnswers = 2

// bootstrapRound dials, in parallel, every configured bootstrap peer that is neither connected
// nor still being dialled by an earlier round, and returns as soon as joinAnswers peers are
// connected (or every dial, this round's and those still running from earlier ones, has
// ended): a node joins through the first bootstrap peers to answer, and does not wait out the
// connect timeout of one that is slow or gone. Its other dials go on in the background (Close
// waits for them) and record their outcome when they end. It returns how many peers had
// answered by then, and how many are configured.
func (d *Discovery) bootstrapRound() (answered, configured int) {
	d.mu.Lock()
	ids := make([]peer.ID, len(d.boot.peers))
	for i, p := range d.boot.peers {
		ids[i] = p.Peer.ID
	}
	d.mu.Unlock()
	connected := make([]bool, len(ids))
	for i, id := range ids {
		connected[i] = d.h.Network().Connectedness(id) == network.Connected
	}
	d.mu.Lock()
	d.boot.rounds++
	for len(d.boot.dialed) > 0 { // outcomes already recorded: only those still to come count
		<-d.boot.dialed
	}
	var dial []int
	pending := 0
	for i := range d.boot.peers {
		p := &d.boot.peers[i]
		switch {
		case d.boot.dialing[i]:
			pending++
		case connected[i]:
			p.Answered, p.LastError = true, ""
		default:
			d.boot.dialing[i] = true
			p.Answered, p.LastTry = false, d.cfg.now()
			dial = append(dial, i)
			pending++
		}
	}
	answered = d.countAnswered()
	configured = len(d.boot.peers)
	d.mu.Unlock()
	for _, i := range dial {
		d.wg.Go(func() { d.dialBootstrap(i) })
	}
	for need := min(joinAnswers, configured); answered < need && pending > 0; pending-- {
		select {
		case ok := <-d.boot.dialed:
			if ok {
				answered++
			}
		case <-d.ctx.Done():
			return answered, configured
		}
	}
	return answered, configured
}

// dialBootstrap dials configured bootstrap peer i for at most the connect timeout, records the
// outcome and sends it to d.boot.dialed.
func (d *Discovery) dialBootstrap(i int) {
	d.mu.Lock()
	p := d.boot.peers[i].Peer
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(d.ctx, d.cfg.connectTimeout)
	defer cancel()
	err := d.h.Connect(ctx, p)
	d.mu.Lock()
	defer d.mu.Unlock()
	st := &d.boot.peers[i]
	if err != nil {
		st.Answered, st.LastError = false, err.Error()
		d.boot.lastErr, d.boot.lastErrAt = "bootstrap peer "+p.ID.String()+": "+st.LastError, d.cfg.now()
		if d.ctx.Err() == nil {
			d.log.Warn("bootstrap peer did not answer; will retry", "bootstrap_peer", p.ID.String(),
				"addrs", p.Addrs, "err", err)
		}
	} else {
		st.Answered, st.LastError = true, ""
		d.log.Info("bootstrap peer answered", "bootstrap_peer", p.ID.String())
	}
	// Under d.mu, with the dialing mark: a round that drains the channel and counts the marks
	// under d.mu sees every outcome exactly once. At most one dial per peer runs, so the send
	// never blocks.
	d.boot.dialing[i] = false
	d.boot.dialed <- err == nil
}

// countAnswered counts the configured bootstrap peers whose last dial, or check, found them
// answering. The caller holds d.mu.
func (d *Discovery) countAnswered() int {
	n := 0
	for _, p := range d.boot.peers {
		if p.Answered {
			n++
		}
	}
	return n
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
