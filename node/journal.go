package node

import (
	"context"
	"sync"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// The gossip replay window survives restarts: every broadcast and group message handed to
// the agent has its id written to the store (store.RememberGossip), and a starting node
// restores its gossip window from them (pubsub.WithReplayRestore). Without it, after a
// restart any peer could replay a broadcast still within its TTL and the agent would get it
// again. The ids are written in batches, off gossip's delivery path: a crash can lose the
// last journalFlush of them (docs/security.md, "Replays").

// journalFlush is how often delivered gossip ids are written to the store.
const journalFlush = 100 * time.Millisecond

// journalMax bounds the ids waiting to be written; beyond it new ones are counted and dropped
// (a store that cannot keep up is already reported by its own errors).
const journalMax = 1 << 16

// gossipJournal collects delivered gossip ids for the store. Its slice is guarded by mu; the
// keeper's journal loop owns the writing.
type gossipJournal struct {
	mu      sync.Mutex
	pending []protocol.ReplayEntry
	dropped uint64
	wake    chan struct{}
}

func newGossipJournal() *gossipJournal { return &gossipJournal{wake: make(chan struct{}, 1)} }

// add is pubsub's delivered hook: it must not block.
func (j *gossipJournal) add(e protocol.ReplayEntry) {
	j.mu.Lock()
	if len(j.pending) >= journalMax {
		j.dropped++
		j.mu.Unlock()
		return
	}
	j.pending = append(j.pending, e)
	full := len(j.pending) >= 256
	j.mu.Unlock()
	if full {
		select {
		case j.wake <- struct{}{}:
		default:
		}
	}
}

// take returns what waits and empties it.
func (j *gossipJournal) take() []protocol.ReplayEntry {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := j.pending
	j.pending = nil
	return out
}

func (j *gossipJournal) stats() (pending int, dropped uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pending), j.dropped
}

// journalLoop writes delivered gossip ids to the store every journalFlush, or sooner when
// many wait, until ctx ends; closeKeeper writes the rest.
func (k *kept) journalLoop(ctx context.Context) {
	t := time.NewTicker(journalFlush)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-k.journal.wake:
		}
		k.flushJournal()
	}
}

// flushJournal writes what waits in the journal to the store.
func (k *kept) flushJournal() {
	if es := k.journal.take(); len(es) > 0 {
		if err := k.store.RememberGossip(es); err != nil {
			k.log.Warn("gossip ids not saved: after a restart these broadcasts could be replayed to the agent", "count", len(es), "err", err.Error())
		}
	}
}
