package pubsub

import (
	"fmt"
	"strings"
	"sync/atomic"

	ps "github.com/libp2p/go-libp2p-pubsub"
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
