package pubsub

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
	ps "github.com/libp2p/go-libp2p-pubsub"
)

// Broadcast sends an event to every agent: type event, intent notify, recipient "*",
// channel notification, on the broadcast topic. It returns the signed message sent. The
// local validator runs first, so an invalid event (no event_type, too large, over our own
// rate) is refused here with the reason.
func (g *Gossip) Broadcast(ctx context.Context, ev protocol.EventPayload, opts ...protocol.Option) (*protocol.Message, error) {
	opts = append([]protocol.Option{protocol.WithChannel(protocol.ChannelNotification), g.defaultTTL()}, opts...)
	m, err := g.b.Event(protocol.Broadcast, protocol.IntentNotify, ev, opts...)
	if err != nil {
		return nil, err
	}
	if err := checkGossipTTL(m); err != nil {
		return nil, err
	}
	th, err := g.topic(topicInfo{name: g.broadcastTopic(), kind: kindBroadcast}, false)
	if err != nil {
		return nil, err
	}
	return m, g.publish(ctx, th, m)
}

// SendToGroup sends a message to every agent that has capability cp, on the group's topic.
// The document is addressed to recipient "*" on channel coordination, with the extension
// member recipient.group = cp (signed, so it cannot be replayed into another group). Its
// type is event for intent notify or health, request otherwise (members answer the sender
// directly; correlation_id is the message_id). payload may be nil, a struct, a map or
// json.RawMessage, and must encode to a JSON object; an event payload needs an event_type.
//
// The node need not be a member of the group. When gossipsub has a way to find peers
// (WithPeerSource or WithDiscovery), SendToGroup waits until at least one member is reachable, bounded by ctx
// or, when ctx has no deadline, DefaultGroupPublishWait.
func (g *Gossip) SendToGroup(ctx context.Context, cp string, intent protocol.Intent, payload any, opts ...protocol.Option) (*protocol.Message, error) {
	if err := ValidateCapability(cp); err != nil {
		return nil, err
	}
	raw, err := encodeObject(payload)
	if err != nil {
		return nil, err
	}
	typ := protocol.TypeRequest
	if intent == protocol.IntentNotify || intent == protocol.IntentHealth {
		typ = protocol.TypeEvent
	}
	group, _ := json.Marshal(cp)
	m := &protocol.Message{}
	m.Envelope.Recipient = protocol.Recipient{AgentID: protocol.Broadcast, Channel: protocol.ChannelCoordination,
		Extra: protocol.Extra{groupField: group}}
	m.Message = protocol.Body{Type: typ, Intent: intent, Payload: raw}
	for _, o := range append([]protocol.Option{g.defaultTTL()}, opts...) {
		o(m)
	}
	if err := g.b.Seal(m); err != nil {
		return nil, err
	}
	if err := checkGossipTTL(m); err != nil {
		return nil, err
	}
	th, err := g.topic(topicInfo{name: g.GroupTopic(cp), kind: kindGroup, group: cp}, false)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultGroupPublishWait)
		defer cancel()
	}
	return m, g.publishToGroup(ctx, th, m)
}

// publishToGroup publishes once at least one member of the group is connected. gossipsub's
// own MinTopicSize counts mesh peers, and a node that only publishes to a topic has no mesh
// in it, so readiness is judged here from the topic's peers, polled outside the event loop
// (a RouterReady runs inside it and must not call back into pubsub). With a discovery,
// gossipsub looks for members while it waits.
func (g *Gossip) publishToGroup(ctx context.Context, th *topicHandle, m *protocol.Message) error {
	if len(th.t.ListPeers()) > 0 {
		return g.publish(ctx, th, m)
	}
	pctx, stop := context.WithCancel(ctx)
	var ready atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for !ready.Load() {
			select {
			case <-pctx.Done():
				return
			case <-t.C:
				ready.Store(len(th.t.ListPeers()) > 0)
			}
		}
	}()
	err := g.publish(ctx, th, m, ps.WithReadiness(func(ps.PubSubRouter, string) (bool, error) { return ready.Load(), nil }))
	stop()
	<-done
	if err == nil && !ready.Load() {
		return fmt.Errorf("pubsub: no member of group %q became reachable: %w", th.info.group, ctx.Err())
	}
	return err
}

func (g *Gossip) publish(ctx context.Context, th *topicHandle, m *protocol.Message, opts ...ps.PubOpt) error {
	data, err := protocol.EncodeJSON(m)
	if err != nil {
		return err
	}
	if len(data) > protocol.MaxGossipBytes {
		return protocol.Errorf(protocol.CodePayloadInvalid, "message is %d bytes; gossip carries at most %d: send it directly instead", len(data), protocol.MaxGossipBytes)
	}
	if err := th.t.Publish(ctx, data, opts...); err != nil {
		return fmt.Errorf("pubsub: publish on %s: %w", th.info.name, err)
	}
	return nil
}

// defaultTTL is the TTL of a gossip message whose caller gives none: the builder's default,
// at most MaxGossipTTL (a node may build direct messages that live longer).
func (g *Gossip) defaultTTL() protocol.Option {
	return protocol.WithTTL(min(g.b.DefaultTTL(), MaxGossipTTL))
}

// checkGossipTTL refuses a document whose TTL is longer than gossip carries (MaxGossipTTL), with
// PAYLOAD_INVALID, before anything is published: every node's validator would reject it.
func checkGossipTTL(m *protocol.Message) error {
	if m.Envelope.TTLSeconds > int64(MaxGossipTTL/time.Second) {
		return protocol.Errorf(protocol.CodePayloadInvalid, "ttl_seconds %d: gossip carries messages for at most %s; send it directly for longer",
			m.Envelope.TTLSeconds, strings.TrimSuffix(MaxGossipTTL.String(), "0m0s"))
	}
	return nil
}

func encodeObject(payload any) (json.RawMessage, error) {
	switch p := payload.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		return p, nil
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "encode payload: %w", err)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "payload must encode to a JSON object")
	}
	return raw, nil
}

// JoinGroup subscribes to the group topic of capability cp: from now on, messages to that
// group are delivered as KindGroup items. Joining twice is a no-op.
func (g *Gossip) JoinGroup(cp string) error {
	if err := ValidateCapability(cp); err != nil {
		return err
	}
	_, err := g.topic(topicInfo{name: g.GroupTopic(cp), kind: kindGroup, group: cp}, true)
	return err
}

// LeaveGroup unsubscribes from the group topic of capability cp and waits until its reader
// has stopped. The node may still send to the group. Leaving a group not joined is a no-op.
func (g *Gossip) LeaveGroup(cp string) error {
	g.topicMu.Lock()
	th, ok := g.topics[g.GroupTopic(cp)]
	if !ok || th.sub == nil {
		g.topicMu.Unlock()
		return nil
	}
	sub, done := th.sub, th.done
	th.sub, th.done = nil, nil
	g.topicMu.Unlock()
	sub.Cancel()
	<-done
	return nil
}

// Groups returns the capabilities whose group topics this node is subscribed to.
func (g *Gossip) Groups() []string {
	g.topicMu.Lock()
	defer g.topicMu.Unlock()
	var out []string
	for _, th := range g.topics {
		if th.info.kind == kindGroup && th.sub != nil {
			out = append(out, th.info.group)
		}
	}
	slices.Sort(out)
	return out
}
