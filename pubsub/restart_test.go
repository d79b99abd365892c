package pubsub

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// The delivered hook hands the node every broadcast and group message delivered, with its
// replay window entry; a Gossip restored from those entries refuses the replay of a delivered
// broadcast, so that after a restart it reaches no agent.
func TestReplayRestoreRefusesDeliveredBroadcast(t *testing.T) {
	var mu sync.Mutex
	var entries []protocol.ReplayEntry
	hook := func(e protocol.ReplayEntry) { mu.Lock(); entries = append(entries, e); mu.Unlock() }
	m := newMesh(t, 2, func(i int) []Option {
		if i == 1 {
			return []Option{WithDiscovery(nil), WithDeliveredHook(hook)}
		}
		return []Option{WithDiscovery(nil)}
	})
	got := collect(t, m.nodes[1], Filter{Kinds: []Kind{KindEvent}})
	m.waitFormed(t, 20*time.Second) // heartbeats have flowed both ways: the hook skips them
	sent, err := m.nodes[0].Broadcast(ctxT(t, 10*time.Second), protocol.EventPayload{EventType: "deploy.done"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the broadcast at node 1", func() bool { return got.count(withID(sent.Envelope.MessageID)) == 1 })
	mu.Lock()
	saved := append([]protocol.ReplayEntry(nil), entries...)
	mu.Unlock()
	want := protocol.ReplayEntry{ID: sent.Envelope.MessageID, Expires: sent.Expires(), Owner: m.hosts[0].ID().String()}
	if len(saved) != 1 || saved[0].ID != want.ID || !saved[0].Expires.Equal(want.Expires) || saved[0].Owner != want.Owner {
		t.Fatalf("the hook saw %+v, want only %+v", saved, want)
	}

	bc := topicInfo{name: m.nodes[1].broadcastTopic(), kind: kindBroadcast}
	fresh := oneNode(t)
	if _, err := fresh.check(bc, psMsg(t, sent, bc.name, m.hosts[0].ID(), m.hosts[0].ID())); err != nil {
		t.Fatalf("without the restored window the replay is accepted, as expected; got %v", err)
	}
	restored := oneNode(t, WithReplayRestore(saved))
	_, err = restored.check(bc, psMsg(t, sent, bc.name, m.hosts[0].ID(), m.hosts[0].ID()))
	if verdict(err) != "ignore" || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("the replay after a restart: %s %v", verdict(err), err)
	}
	if n := restored.replay.OwnerLen(m.hosts[0].ID().String()); n != 1 {
		t.Fatalf("the restored entry is charged to %d ids of its owner, want 1", n)
	}
}
