package pubsub

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	ps "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// Under our router parameters, the first copy of a beat-sized document (1.3 KB with its
// certificate) draws no IDONTWANT from the nodes it reaches, and a document of
// idontwantThreshold bytes does: a beat costs the mesh its copies, not an RPC per mesh link
// more (docs/gossip.md, "Parameters").
func TestGossipParams_IDontWantOnlyForLargeDocuments(t *testing.T) {
	const n = 4
	net := testsupport.Mocknet(t, n) // connected to one another
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tracers := make([]*idontwantTracer, n)
	topics := make([]*ps.Topic, n)
	subs := make([]*ps.Subscription, n)
	for i, h := range net.Hosts {
		tracers[i] = &idontwantTracer{grafted: map[peer.ID]bool{}}
		r, err := ps.NewGossipSub(ctx, h, ps.WithGossipSubParams(gossipParams()),
			ps.WithMessageSignaturePolicy(ps.StrictNoSign), ps.WithMessageIdFn(msgID),
			ps.WithRawTracer(tracers[i]))
		if err != nil {
			t.Fatal(err)
		}
		if topics[i], err = r.Join("t"); err != nil {
			t.Fatal(err)
		}
		if subs[i], err = topics[i].Subscribe(); err != nil {
			t.Fatal(err)
		}
	}
	testsupport.WaitFor(t, 10*time.Second, "every node grafted its peers into the topic's mesh", func() bool {
		for _, tr := range tracers {
			if tr.meshSize() < n-1 {
				return false
			}
		}
		return true
	})

	small := bytes.Repeat([]byte{'b'}, 1300)               // a beat with its certificate
	large := bytes.Repeat([]byte{'e'}, idontwantThreshold) // a large event
	var drew []int                                         // IDONTWANT ids sent for each document
	for _, doc := range [][]byte{small, large} {
		before := 0
		for _, tr := range tracers {
			before += tr.total()
		}
		if err := topics[0].Publish(ctx, doc); err != nil {
			t.Fatal(err)
		}
		// IDONTWANT goes out before a copy is validated, so before it is delivered.
		for i := 1; i < n; i++ {
			rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
			m, err := subs[i].Next(rctx)
			rcancel()
			if err != nil || !bytes.Equal(m.Data, doc) {
				t.Fatalf("node %d: got %d bytes, %v; want the %d-byte document", i, len(m.GetData()), err, len(doc))
			}
		}
		after := 0
		for _, tr := range tracers {
			after += tr.total()
		}
		drew = append(drew, after-before)
	}
	if drew[0] != 0 {
		t.Errorf("a %d-byte document drew %d IDONTWANT, want none", len(small), drew[0])
	}
	if drew[1] == 0 {
		t.Errorf("a %d-byte document drew no IDONTWANT, want one to each mesh peer", len(large))
	}
}

// idontwantTracer counts the IDONTWANT ids a router sent and the mesh peers it grafted.
type idontwantTracer struct {
	mu      sync.Mutex
	sent    int
	grafted map[peer.ID]bool
}

func (tr *idontwantTracer) meshSize() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.grafted)
}

func (tr *idontwantTracer) total() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.sent
}

func (tr *idontwantTracer) SendRPC(rpc *ps.RPC, _ peer.ID) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, c := range rpc.GetControl().GetIdontwant() {
		tr.sent += len(c.GetMessageIDs())
	}
}

func (tr *idontwantTracer) Graft(p peer.ID, _ string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.grafted[p] = true
}

func (tr *idontwantTracer) Prune(p peer.ID, _ string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	delete(tr.grafted, p)
}

func (*idontwantTracer) AddPeer(peer.ID, protocol.ID)             {}
func (*idontwantTracer) RemovePeer(peer.ID)                       {}
func (*idontwantTracer) OnNewOutboundStream(peer.ID, protocol.ID) {}
func (*idontwantTracer) OnClosedOutboundStream(peer.ID)           {}
func (*idontwantTracer) Join(string)                              {}
func (*idontwantTracer) Leave(string)                             {}
func (*idontwantTracer) ValidateMessage(*ps.Message)              {}
func (*idontwantTracer) DeliverMessage(*ps.Message)               {}
func (*idontwantTracer) RejectMessage(*ps.Message, string)        {}
func (*idontwantTracer) DuplicateMessage(*ps.Message)             {}
func (*idontwantTracer) ThrottlePeer(peer.ID)                     {}
func (*idontwantTracer) RecvRPC(*ps.RPC)                          {}
func (*idontwantTracer) DropRPC(*ps.RPC, peer.ID)                 {}
func (*idontwantTracer) UndeliverableMessage(*ps.Message)         {}
