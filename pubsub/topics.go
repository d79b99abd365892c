package pubsub

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
	ps "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
)

const (
	broadcastName = "broadcast"
	heartbeatName = "heartbeat"
	groupName     = "group/"
)

// topicKind says what a topic carries.
type topicKind int

const (
	kindBroadcast topicKind = iota
	kindHeartbeat
	kindGroup
)

// topicInfo is what the validator knows about a topic.
type topicInfo struct {
	name  string
	kind  topicKind
	group string // capability, for kindGroup
}

func (g *Gossip) broadcastTopic() string { return g.cfg.prefix + broadcastName }
func (g *Gossip) heartbeatTopic() string { return g.cfg.prefix + heartbeatName }

// GroupTopic returns the topic of the group of agents with capability cp.
func (g *Gossip) GroupTopic(cp string) string { return g.cfg.prefix + groupName + cp }

// ValidateCapability checks a capability name: 1 to 64 letters, digits, '.', '_', '-' or ':',
// starting with a letter or digit. It becomes part of a topic name.
func ValidateCapability(cp string) error {
	if cp == "" || len(cp) > MaxCapabilityLength {
		return fmt.Errorf("pubsub: capability %q must be 1 to %d characters", cp, MaxCapabilityLength)
	}
	for i := 0; i < len(cp); i++ {
		c := cp[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if alnum || i > 0 && strings.IndexByte("._-:", c) >= 0 {
			continue
		}
		return fmt.Errorf("pubsub: capability %q: character %q at %d is not allowed (letters, digits, '.', '_', '-', ':'; a letter or digit first)", cp, c, i)
	}
	return nil
}

// peerEvents returns a joined topic's handle and a handler of its peer events, which the
// caller cancels.
func (g *Gossip) peerEvents(topic string) (*topicHandle, *ps.TopicEventHandler, error) {
	g.topicMu.Lock()
	th := g.topics[topic]
	g.topicMu.Unlock()
	evs, err := th.t.EventHandler()
	if err != nil {
		return nil, nil, fmt.Errorf("pubsub: peer events of %s: %w", topic, err)
	}
	return th, evs, nil
}

// startCountPeers starts countPeers on a topic's peer events.
func (g *Gossip) startCountPeers(topic string, n *atomic.Int64) error {
	_, evs, err := g.peerEvents(topic)
	if err != nil {
		return err
	}
	g.wg.Add(1)
	go g.countPeers(evs, n)
	return nil
}

// countPeers keeps n, the peers subscribed to a topic, from its peer events (the first ones
// are the peers already there) until Close.
func (g *Gossip) countPeers(evs *ps.TopicEventHandler, n *atomic.Int64) {
	defer g.wg.Done()
	defer evs.Cancel()
	for {
		ev, err := evs.NextPeerEvent(g.ctx)
		if err != nil {
			return
		}
		switch ev.Type {
		case ps.PeerJoin:
			n.Add(1)
		case ps.PeerLeave:
			n.Add(-1)
		}
	}
}

type topicHandle struct {
	info topicInfo
	t    *ps.Topic
	sub  *ps.Subscription // nil when only publishing
	done chan struct{}    // closed when the reader of sub returns
}

// topic joins a topic, registers its validator and score parameters, and subscribes when
// asked. The caller must not hold topicMu.
func (g *Gossip) topic(info topicInfo, subscribe bool) (*topicHandle, error) {
	g.topicMu.Lock()
	defer g.topicMu.Unlock()
	if g.ctx.Err() != nil {
		return nil, ErrClosed
	}
	th, ok := g.topics[info.name]
	if !ok {
		if info.kind == kindGroup && len(g.topics) >= maxGroupTopics+2 {
			return nil, fmt.Errorf("pubsub: this node already uses %d group topics, the most it may", maxGroupTopics)
		}
		// Without an author check a validator never waits: it runs inline, on gossipsub's
		// validation workers. An author check may fetch a certificate: each validation then
		// runs on a goroutine of its own (gossipsub bounds them), within AuthorCheckWait.
		vopts := []ps.ValidatorOpt{ps.WithValidatorInline(g.cfg.authorCheck == nil)}
		if g.cfg.authorCheck != nil {
			vopts = append(vopts, ps.WithValidatorTimeout(AuthorCheckWait+time.Second))
		}
		if err := g.ps.RegisterTopicValidator(info.name, g.validator(info), vopts...); err != nil {
			return nil, fmt.Errorf("pubsub: validator for %s: %w", info.name, err)
		}
		t, err := g.ps.Join(info.name)
		if err != nil {
			return nil, fmt.Errorf("pubsub: join %s: %w", info.name, err)
		}
		if err := t.SetScoreParams(topicScoreParams()); err != nil {
			return nil, fmt.Errorf("pubsub: score parameters of %s: %w", info.name, err)
		}
		th = &topicHandle{info: info, t: t}
		g.topics[info.name] = th
	}
	if subscribe && th.sub == nil {
		sub, err := th.t.Subscribe(ps.WithBufferSize(1024))
		if err != nil {
			return nil, fmt.Errorf("pubsub: subscribe to %s: %w", info.name, err)
		}
		th.sub, th.done = sub, make(chan struct{})
		g.wg.Add(1)
		go g.read(th.info, sub, th.done)
	}
	return th, nil
}

// read delivers the messages of one subscription until it is cancelled.
func (g *Gossip) read(info topicInfo, sub *ps.Subscription, done chan struct{}) {
	defer g.wg.Done()
	defer close(done)
	for {
		m, err := sub.Next(g.ctx)
		if err != nil {
			return
		}
		v, ok := m.ValidatorData.(*validated)
		if ok && m.GetFrom() == g.h.ID() {
			g.ownReturned(v.doc.Envelope.MessageID)
		}
		if !ok || m.GetFrom() == g.h.ID() {
			continue // our own publication
		}
		if info.kind == kindHeartbeat {
			g.probeArrived(m.ID)
		}
		g.deliver(info, m.GetFrom(), m.ReceivedFrom, v)
	}
}

// deliver hands a validated message to the subscribers, and a heartbeat to the liveness
// table. relayer is the peer the message came from, its owner in the replay window.
func (g *Gossip) deliver(info topicInfo, author, relayer peer.ID, v *validated) {
	it := &Item{Message: v.doc, Author: author}
	if info.kind != kindHeartbeat && g.cfg.delivered != nil {
		g.cfg.delivered(protocol.ReplayEntry{ID: v.doc.Envelope.MessageID, Expires: v.doc.Expires(), Owner: relayer.String()})
	}
	now := g.cfg.clock()
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	switch info.kind {
	case kindBroadcast:
		it.Kind, it.Event = KindEvent, v.event
	case kindGroup:
		it.Kind, it.Group = KindGroup, v.group
	case kindHeartbeat:
		it.Kind, it.Heartbeat = KindHeartbeat, v.hb
		sent, _ := v.doc.Time()
		trs, _ := g.live.Observe(Heard{AgentID: v.doc.Envelope.Sender.AgentID, PeerID: author, Payload: v.hb,
			Interval: v.interval, Sent: sent, MessageID: v.doc.Envelope.MessageID}, now)
		g.publishLocal(it)
		for _, tr := range trs {
			g.emitLocked(tr)
		}
		g.healthChangedLocked("a suspicion was refuted")
		return
	}
	g.publishLocal(it)
}
