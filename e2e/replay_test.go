package e2e

import (
	"context"
	bin "encoding/binary"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pprotocol "github.com/libp2p/go-libp2p/core/protocol"
	"google.golang.org/protobuf/proto"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/protocol"
)

// broadcastTopic is the gossip topic of broadcasts (pubsub.DefaultTopicPrefix + "broadcast").
const broadcastTopic = "/iacp/1/broadcast"

// inject speaks gossipsub by hand to target: it announces the broadcast topic and sends one
// RPC carrying doc as a message whose author is from, as a relayer does.
func (a *attacker) inject(target peer.ID, from peer.ID, doc []byte) {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := a.h.NewStream(ctx, target, "/meshsub/1.1.0")
	if err != nil {
		a.t.Fatal(err)
	}
	defer s.Close()
	topic, yes := broadcastTopic, true
	rpc := &pb.RPC{
		Subscriptions: []*pb.RPC_SubOpts{{Subscribe: &yes, Topicid: &topic}},
		Publish:       []*pb.Message{{From: []byte(from), Data: doc, Topic: &topic}},
	}
	raw, err := proto.Marshal(rpc)
	if err != nil {
		a.t.Fatal(err)
	}
	_ = s.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := s.Write(append(bin.AppendUvarint(nil, uint64(len(raw))), raw...)); err != nil {
		a.t.Fatal(err)
	}
}

// speakGossip lets the node under test open its own gossipsub stream to the attacker (it
// reads and discards), so that it treats the attacker as an ordinary gossip peer.
func (a *attacker) speakGossip() {
	for _, id := range []string{"/meshsub/1.0.0", "/meshsub/1.1.0", "/meshsub/1.2.0", "/meshsub/1.3.0"} {
		a.h.SetStreamHandler(libp2pprotocol.ID(id), func(s network.Stream) {
			defer s.Close()
			_, _ = io.Copy(io.Discard, io.LimitReader(s, 1<<20))
		})
	}
}

// events collects the broadcast items p's agent receives on its event stream.
type events struct {
	ch     chan *protocol.Message
	cancel context.CancelFunc
	done   chan struct{}
}

func listen(t *testing.T, p *proc) *events {
	t.Helper()
	c := apiclient.New(fmt.Sprintf("127.0.0.1:%d", p.apiPort), p.token)
	ctx, cancel := context.WithCancel(context.Background())
	e := &events{ch: make(chan *protocol.Message, 64), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		defer c.Close()
		_ = api.Events(ctx, c, api.EventFilter{Kinds: []string{"event"}}, func(it api.EventItem) error {
			if it.Message != nil {
				select {
				case e.ch <- it.Message:
				default:
				}
			}
			return nil
		})
	}()
	t.Cleanup(e.stop)
	return e
}

func (e *events) stop() {
	e.cancel()
	<-e.done
}

// waitEvent waits up to d for an event whose event_type is typ; nil when none came.
func (e *events) waitEvent(typ string, d time.Duration) *protocol.Message {
	deadline := time.After(d)
	for {
		select {
		case m := <-e.ch:
			if strings.Contains(string(m.Message.Payload), `"event_type":"`+typ+`"`) {
				return m
			}
		case <-deadline:
			return nil
		}
	}
}

// Issue 13: nothing saved gossip's replay window, so after a restart any peer could replay a
// broadcast still within its TTL and the agent got it again. A node that restarts restores
// the ids of the broadcasts it delivered: a relayer replaying one reaches no agent, while a
// new broadcast sent the same way (by the relayer, a certified member of the mesh) still does.
func TestHostile_BroadcastReplayedAfterRestartReachesNoAgent(t *testing.T) {
	a := newProc(t, "a", "e2e:lab:alice")
	a.start()
	b := joinProc(t, "b", "e2e:lab:bob", a)
	b.boot = a.peerAddr()
	b.start()
	ev := listen(t, b)
	var original *protocol.Message
	for i := 0; i < 40 && original == nil; i++ { // until gossip has formed between the two
		if code, body, err := a.do("POST", "/v1/broadcast", map[string]any{"event_type": "replay.me"}); err != nil || code != 202 {
			t.Fatalf("broadcast: %d %s %v", code, body, err)
		}
		original = ev.waitEvent("replay.me", 500*time.Millisecond)
	}
	if original == nil {
		t.Fatal("the broadcast never reached bob's agent")
	}
	ev.stop()
	b.stop()
	b.start()
	ev = listen(t, b)
	// bob takes alice's broadcasts again (it holds her certificate once more), so that only
	// its restored replay window can stop the replay below.
	var again *protocol.Message
	for i := 0; i < 40 && again == nil; i++ {
		if code, body, err := a.do("POST", "/v1/broadcast", map[string]any{"event_type": "alice.again"}); err != nil || code != 202 {
			t.Fatalf("broadcast: %d %s %v", code, body, err)
		}
		again = ev.waitEvent("alice.again", 500*time.Millisecond)
	}
	if again == nil {
		t.Fatal("after its restart bob's agent never got a new broadcast of alice's, so the replay below would prove nothing")
	}
	// The replaying relayer is a certified member of the mesh, so that its own new broadcast
	// (the control) is one bob's agent takes.
	evil := newAttacker(t, "e2e:lab:mallory")
	evil.join(a)
	evil.speakGossip()
	target := evil.connect(b)
	var control *protocol.Message
	// gossipsub takes the attacker in once it has talked to it, and bob takes the attacker's
	// broadcasts once it has fetched its certificate (in the background, after the first): a
	// new broadcast each time, since one ignored may not come again.
	for i := 0; i < 20 && control == nil; i++ {
		fresh, err := evil.b.Event(protocol.Broadcast, protocol.IntentNotify, protocol.EventPayload{EventType: "fresh"}, protocol.WithChannel(protocol.ChannelNotification))
		if err != nil {
			t.Fatal(err)
		}
		evil.inject(target, evil.h.ID(), mustEncode(t, fresh))
		control = ev.waitEvent("fresh", 500*time.Millisecond)
	}
	if control == nil {
		t.Fatal("a new broadcast relayed by hand never reached bob's agent: the injection does not work, so the replay below proves nothing")
	}
	aliceID, err := peer.Decode(original.Envelope.Sender.PeerID)
	if err != nil {
		t.Fatal(err)
	}
	evil.inject(target, aliceID, mustEncode(t, original))
	// Only the original counts: another "replay.me" of the first loop, published before gossip
	// had formed, may reach bob for the first time now (gossiped from alice's message cache),
	// and is no replay.
	deadline := time.Now().Add(3 * time.Second)
	for d := time.Until(deadline); d > 0; d = time.Until(deadline) {
		if m := ev.waitEvent("replay.me", d); m != nil && m.Envelope.MessageID == original.Envelope.MessageID {
			t.Fatalf("the replayed broadcast %s reached bob's agent after its restart", m.Envelope.MessageID)
		}
	}
}

func mustEncode(t testing.TB, m *protocol.Message) []byte {
	t.Helper()
	b, err := protocol.EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
