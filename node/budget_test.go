package node

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// budgetMesh starts two senders and a receiver (node 2) whose budget is set by queue (per
// stream, per peer, in all), and returns them with a signed event of frameBytes from each
// sender, and the receiver's peer ids of the senders.
func budgetMesh(t *testing.T, stream, perPeer, total int64) (m *mesh, frames [2][]byte, ids [2]peer.ID) {
	t.Helper()
	m = newMesh(t, 3, nil, func(i int, _ *mesh) []Option {
		if i != 2 {
			return nil
		}
		return []Option{func(c *Config) error {
			c.MaxMessageBytes, c.InboxSenderBytes = 4<<20, 4<<20
			c.QueueStreamBytes, c.QueuePeerBytes, c.QueueTotalBytes = stream, perPeer, total
			return nil
		}}
	})
	for i := range 2 {
		ev, err := m.nodes[i].Builder().Event(agentName(2), protocol.IntentNotify,
			protocol.EventPayload{EventType: "large", Detail: strings.Repeat("a", frameBytes)})
		if err != nil {
			t.Fatal(err)
		}
		frames[i] = mustEncode(t, ev)
		ids[i] = m.nodes[i].ID()
	}
	return m, frames, ids
}

// frameBytes is the size of budgetMesh's frames: large (largeFrame), so that holding the
// receiver's large-frame slot keeps a frame that was read from being served.
const frameBytes = largeFrame + 256<<10

// sendFrame writes raw on a new stream from node i to node 2 and waits for its answer on a
// goroutine the test waits for; answered is closed when the answer came.
func sendFrame(t *testing.T, wg *sync.WaitGroup, m *mesh, i int, raw []byte) (answered chan struct{}) {
	t.Helper()
	c := dialRaw(t, m.nodes[i], m.nodes[2])
	answered = make(chan struct{})
	wg.Go(func() {
		if protocol.WriteFrame(c.s, raw) != nil {
			return
		}
		if r, err := c.next(); err == nil && r.Message.Type == protocol.TypeResponse {
			close(answered)
		}
	})
	return answered
}

// held returns the bytes the budget holds for p and in all, and whether a reader waits.
func held(b *queueBudget, p peer.ID) (peerBytes, total int64, waiting bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peers[p], b.used, b.waiting
}

// occupyLarge takes the node's large-frame slot, so that a large frame read meanwhile is held
// unserved, and returns what gives it back.
func occupyLarge(t *testing.T, n *Node) func() {
	t.Helper()
	n.large <- struct{}{}
	var once sync.Once
	release := func() { once.Do(func() { <-n.large }) }
	t.Cleanup(release)
	return release
}

// The node-wide budget: with room for one large frame in all, a frame one peer sent is read
// and held while it is handled, and another peer's frame waits unread (its reader waiting for
// room, nothing of it charged) until the first is done with; then it is read, and both are
// answered. The budget never held the two at once.
func TestBudget_AFrameWaitsUnreadForTheNodeWideBudget(t *testing.T) {
	m, frames, ids := budgetMesh(t, 2<<20, 2<<20, 2<<20)
	b := m.nodes[2].budget
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // last: after the streams are reset and the slot given back
	free := occupyLarge(t, m.nodes[2])
	first := sendFrame(t, &wg, m, 0, frames[0])
	testsupport.WaitFor(t, 10*time.Second, "the first frame to be read and held", func() bool {
		p, _, _ := held(b, ids[0])
		return p == int64(len(frames[0]))
	})
	second := sendFrame(t, &wg, m, 1, frames[1])
	testsupport.WaitFor(t, 10*time.Second, "the second frame's reader to wait for room", func() bool {
		_, _, waiting := held(b, ids[1])
		return waiting
	})
	if p, total, _ := held(b, ids[1]); p != 0 || total != int64(len(frames[0])) {
		t.Fatalf("while the first frame is held, the second peer has %d bytes charged and the node %d; want 0 and %d", p, total, len(frames[0]))
	}
	free()
	for i, ch := range []chan struct{}{first, second} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("frame %d was never answered", i+1)
		}
	}
	testsupport.WaitFor(t, 10*time.Second, "every frame's bytes to be released", func() bool { return b.stats().Bytes == 0 })
	if st := b.stats(); st.PeakBytes > int64(len(frames[0])) {
		t.Fatalf("the budget held %d bytes at its peak: more than the one frame (%d bytes) it has room for", st.PeakBytes, len(frames[0]))
	}
}

// A sender is charged for what it holds: with room for one large frame per peer and two in
// all, a peer whose frame is held has its next one wait, unread, on its own share, while
// another peer's frame is read beside the first; everything is answered once the first is done
// with.
func TestBudget_ASenderIsChargedForWhatItHolds(t *testing.T) {
	m, frames, ids := budgetMesh(t, 2<<20, 2<<20, 4<<20)
	b := m.nodes[2].budget
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // last: after the streams are reset and the slot given back
	free := occupyLarge(t, m.nodes[2])
	answers := []chan struct{}{sendFrame(t, &wg, m, 0, frames[0])}
	testsupport.WaitFor(t, 10*time.Second, "the first peer's frame to be read and held", func() bool {
		p, _, _ := held(b, ids[0])
		return p == int64(len(frames[0]))
	})
	again, err := m.nodes[0].Builder().Event(agentName(2), protocol.IntentNotify,
		protocol.EventPayload{EventType: "large", Detail: strings.Repeat("b", frameBytes)})
	if err != nil {
		t.Fatal(err)
	}
	answers = append(answers, sendFrame(t, &wg, m, 0, mustEncode(t, again))) // the same peer, another stream
	testsupport.WaitFor(t, 10*time.Second, "the first peer's second frame to wait for room", func() bool {
		_, _, waiting := held(b, ids[0])
		return waiting
	})
	answers = append(answers, sendFrame(t, &wg, m, 1, frames[1]))
	testsupport.WaitFor(t, 10*time.Second, "the other peer's frame to be read beside the first", func() bool {
		p, _, _ := held(b, ids[1])
		return p == int64(len(frames[1]))
	})
	if p, total, _ := held(b, ids[0]); p != int64(len(frames[0])) || total != int64(len(frames[0])+len(frames[1])) {
		t.Fatalf("the first peer has %d bytes charged and the node %d; want one frame of each peer (%d, %d)", p, total, len(frames[0]), len(frames[0])+len(frames[1]))
	}
	free()
	for i, ch := range answers {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("frame %d was never answered", i+1)
		}
	}
	if st := b.stats(); st.PeakPeerBytes > int64(len(frames[0])) {
		t.Fatalf("one peer had %d bytes charged at its peak: more than its one frame (%d bytes)", st.PeakPeerBytes, len(frames[0]))
	}
}

// The local agent's bodies (HoldLocal) take their turn in the same budget, as one more peer:
// while a peer's frame holds the whole budget, a body waits; a wait that outlasts its context
// is refused, and once the frame is done with the body gets its room.
func TestBudget_TheLocalAgentsBodiesTakeTheirTurn(t *testing.T) {
	m, frames, ids := budgetMesh(t, 2<<20, 2<<20, 2<<20)
	n := m.nodes[2]
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // last: after the streams are reset and the slot given back
	free := occupyLarge(t, n)
	answered := sendFrame(t, &wg, m, 0, frames[0])
	testsupport.WaitFor(t, 10*time.Second, "the frame to be read and held", func() bool {
		p, _, _ := held(n.budget, ids[0])
		return p == int64(len(frames[0]))
	})
	ctx, cancel := context.WithTimeout(testCtx(t), 50*time.Millisecond)
	defer cancel()
	if _, err := n.HoldLocal(ctx, 1<<20); err == nil {
		t.Fatal("a body got room while a peer's frame held the whole budget")
	}
	got := make(chan func(), 1)
	wg.Go(func() {
		if release, err := n.HoldLocal(testCtx(t), 1<<20); err == nil {
			got <- release
		}
	})
	free()
	<-answered
	select {
	case release := <-got:
		if p, _, _ := held(n.budget, localAgent); p != 1<<20 {
			t.Fatalf("the local agent has %d bytes charged, want its body's", p)
		}
		release()
	case <-time.After(10 * time.Second):
		t.Fatal("the body never got room after the frame was done with")
	}
}
