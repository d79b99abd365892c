package node

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/delivery"
	"github.com/iacp-node/iacp-node/internal/retry"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
	"github.com/iacp-node/iacp-node/store"
)

// keeper is what durable delivery keeps: kept, the store and the delivery engine over it, or
// keepNothing when durable delivery is off.
type keeper interface {
	// send stores m in the outbox and makes its first attempt (delivery.Engine.Send); only
	// Send's durable path calls it.
	send(ctx context.Context, m *protocol.Message, raw []byte) (queued bool, err error)
	// acceptAll stores a batch of inbound messages before their receipts
	// (delivery.Engine.Accept): dups[i] reports one accepted before.
	acceptAll(batch []inbound) (dups []bool, errs []error)
	// taken and handled forget an inbound message the agent, or a handler, took
	// (delivery.Engine.Taken, TakenLazily).
	taken(id string) error
	handled(id string) error
	// pending is what the agent had not taken before a restart; begin starts the engine's
	// retry loop and offers pending again, as the audit log says (delivery.Engine.Redeliver).
	pending() []store.InboxEntry
	begin(pending []store.InboxEntry, a delivery.Audited)
	// cancel takes a message out of the outbox; outbox lists it.
	cancel(id string) (bool, error)
	outbox() ([]store.OutboxEntry, error)
	// peerReturned, agentReturned and agentHeard have the engine retry a recipient's queue at
	// once.
	peerReturned(p peer.ID)
	agentReturned(agentID string)
	agentHeard(agentID string)
	// gossipWindow is the options that restore gossip's replay window from the store and
	// journal every id it delivers (journal.go).
	gossipWindow() ([]pubsub.Option, error)
	// putRecord, records and deleteRecord keep durable records (records.go).
	putRecord(kind, id string, v []byte) error
	records(kind string) (map[string][]byte, error)
	deleteRecord(kind, id string) error
	// journalStats is the journal's ids waiting to be written, and those dropped.
	journalStats() (pending int, dropped uint64)
	// run writes the journal and purges the expired seen ids until ctx ends; closeKeeper
	// stops the engine, writes what the journal holds and closes the store.
	run(ctx context.Context)
	closeKeeper() error
}

// purgeEvery is how often the store forgets the ids of expired messages (its seen set).
const purgeEvery = time.Minute

// kept is durable delivery on: the store, the delivery engine over it and the journal of the
// gossip ids delivered (journal.go).
type kept struct {
	store   *store.Store
	engine  *delivery.Engine
	journal *gossipJournal
	log     *slog.Logger
	now     func() time.Time
}

// openStore opens the store in the data directory and restores the replay window from its
// seen ids.
func openStore(c *Config, side durableSide) (*store.Store, error) {
	opts := append([]store.Option{store.WithClock(c.Clock), store.WithLogger(side.log.With("subsystem", "store")),
		store.WithMaxSenderInboxBytes(c.InboxSenderBytes)}, c.StoreOptions...)
	st, err := store.Open(filepath.Join(c.DataDir, "store"), opts...)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	seen, err := st.Seen(c.Clock())
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	if dropped := side.replay.Restore(seen, c.Clock()); dropped > 0 {
		side.log.Warn("replay window full while restoring; newest ids dropped", "dropped", dropped)
	}
	return st, nil
}

// newKept builds the delivery engine over st, with the audit log and the node's side of d.
func newKept(ctx context.Context, st *store.Store, c *Config, d *durable) (*kept, error) {
	e, err := delivery.New(ctx, delivery.Config{
		Store: st, Deliver: d.side.deliver, Expired: d.tell, Audit: d.hook(),
		HandOver: func(m *protocol.Message, size int) error {
			p, _ := protocol.PeerIDOf(m)
			return d.side.handOver(m, p, size)
		},
		PeerOf: d.side.peerOf, Now: c.Clock,
		RetryMin: c.RetryMin, RetryMax: c.RetryMax, AttemptTimeout: c.FrameTimeout, Jitter: retry.NewJitter(c.Seed, 3),
		Log: d.side.log,
	})
	if err != nil {
		return nil, err
	}
	return &kept{store: st, engine: e, journal: newGossipJournal(), log: d.side.log, now: c.Clock}, nil
}

func (k *kept) send(ctx context.Context, m *protocol.Message, raw []byte) (bool, error) {
	return k.engine.Send(ctx, m, raw)
}

// sendOnly is send for the approvals, which hand a message over and learn only its outcome.
func (k *kept) sendOnly(ctx context.Context, m *protocol.Message, raw []byte) error {
	_, err := k.engine.Send(ctx, m, raw)
	return err
}

func (k *kept) acceptAll(batch []inbound) ([]bool, []error) {
	ms, raws := make([]*protocol.Message, len(batch)), make([][]byte, len(batch))
	for i := range batch {
		ms[i], raws[i] = batch[i].m, batch[i].raw
	}
	return k.engine.Accept(ms, raws)
}

func (k *kept) taken(id string) error       { return k.engine.Taken(id) }
func (k *kept) handled(id string) error     { return k.engine.TakenLazily(id) }
func (k *kept) pending() []store.InboxEntry { return k.engine.Pending() }

func (k *kept) begin(pending []store.InboxEntry, a delivery.Audited) {
	k.engine.Start()
	k.engine.Redeliver(pending, a)
}

func (k *kept) cancel(id string) (bool, error)       { return k.engine.Cancel(id) }
func (k *kept) outbox() ([]store.OutboxEntry, error) { return k.store.List() }
func (k *kept) peerReturned(p peer.ID)               { k.engine.PeerReturned(p) }
func (k *kept) agentReturned(agentID string)         { k.engine.AgentReturned(agentID) }
func (k *kept) agentHeard(agentID string)            { k.engine.AgentHeard(agentID) }

func (k *kept) gossipWindow() ([]pubsub.Option, error) {
	seen, err := k.store.GossipSeen(k.now())
	if err != nil {
		return nil, err
	}
	return []pubsub.Option{pubsub.WithReplayRestore(seen), pubsub.WithDeliveredHook(k.journal.add)}, nil
}

func (k *kept) putRecord(kind, id string, v []byte) error { return k.store.PutRecord(kind, id, v) }
func (k *kept) records(kind string) (map[string][]byte, error) {
	return k.store.Records(kind)
}
func (k *kept) deleteRecord(kind, id string) error          { return k.store.DeleteRecord(kind, id) }
func (k *kept) journalStats() (pending int, dropped uint64) { return k.journal.stats() }

// run writes the journal (journalLoop) and purges the expired seen ids every purgeEvery, each
// on its own goroutine, until ctx ends.
func (k *kept) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { k.journalLoop(ctx) })
	t := time.NewTicker(purgeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-t.C:
			k.purgeSeen(ctx)
		}
	}
}

// purgeSeen forgets the seen ids whose messages have expired: they can no longer be accepted,
// so forgetting them cannot let a replay through, and the seen set stays as large as the
// messages still alive.
func (k *kept) purgeSeen(ctx context.Context) {
	total := 0
	for {
		// Each call removes at most store.MaxPurgePerCall ids, so that a backlog never holds
		// one commit long; a full call means more may be due.
		n, err := k.store.PurgeSeen(k.now())
		total += n
		if err != nil {
			k.log.Error("store: purge seen ids", "err", err.Error())
			break
		}
		if n < store.MaxPurgePerCall || ctx.Err() != nil {
			break
		}
	}
	if total > 0 {
		k.log.Debug("store: forgot the ids of expired messages", "count", total)
	}
}

// closeKeeper stops the engine, writes what the journal holds and closes the store.
func (k *kept) closeKeeper() error {
	k.engine.Close()
	k.flushJournal()
	return k.store.Close()
}

// keepNothing is durable delivery off: nothing is stored, an inbound message is new to it,
// there is no outbox, and records need the store.
type keepNothing struct{}

func (keepNothing) send(context.Context, *protocol.Message, []byte) (bool, error) {
	return false, protocol.Errorf(protocol.CodeCapabilityMismatch, "durable delivery is off: there is no outbox")
}

func (keepNothing) acceptAll(batch []inbound) ([]bool, []error) {
	return make([]bool, len(batch)), make([]error, len(batch))
}

func (keepNothing) taken(string) error                         { return nil }
func (keepNothing) handled(string) error                       { return nil }
func (keepNothing) pending() []store.InboxEntry                { return nil }
func (keepNothing) begin([]store.InboxEntry, delivery.Audited) {}
func (keepNothing) cancel(string) (bool, error)                { return false, nil }
func (keepNothing) outbox() ([]store.OutboxEntry, error)       { return nil, nil }
func (keepNothing) peerReturned(peer.ID)                       {}
func (keepNothing) agentReturned(string)                       {}
func (keepNothing) agentHeard(string)                          {}
func (keepNothing) gossipWindow() ([]pubsub.Option, error)     { return nil, nil }
func (keepNothing) journalStats() (int, uint64)                { return 0, 0 }
func (keepNothing) run(context.Context)                        {}
func (keepNothing) closeKeeper() error                         { return nil }

func (keepNothing) putRecord(string, string, []byte) error {
	return errNoStore("keeping a record")
}

func (keepNothing) records(string) (map[string][]byte, error) {
	return nil, errNoStore("reading records")
}

func (keepNothing) deleteRecord(string, string) error { return errNoStore("deleting a record") }
