package node

import (
	"context"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
)

// What gossip hears, followed: liveness transitions and events (for trust's revocation
// lists), the beats of agents (with durable delivery) and group requests (askserve.go), each
// on a subscription of its own, so that a burst of one kind never fills the others'.

// followBuffer is the subscription buffer of the liveness and beat followers.
const followBuffer = 256

// meshHooks are what the mesh tells the node of what gossip hears; the node sets them
// before start. Each is a no-op until set.
type meshHooks struct {
	heardEvent func(ev protocol.EventPayload, author peer.ID)          // an event (trust: revocation lists)
	heard      func(agentID string, p peer.ID) (learn bool, err error) // trust's say on an agent gossip found alive on p
	learn      func(agentID string, p peer.ID)                         // the directory learns where an agent is
	peerOf     func(agentID string) (peer.ID, bool)                    // the directory's peer of an agent
	returned   func(agentID string)                                    // an agent came back: retry its queue
	beat       func(agentID string)                                    // a recipient beat: retry it if its last attempt failed
	request    func(it *pubsub.Item)                                   // a group request for the agent (Node.groupRequest)
}

func noHooks() meshHooks {
	return meshHooks{
		heardEvent: func(protocol.EventPayload, peer.ID) {},
		heard:      func(string, peer.ID) (bool, error) { return false, nil },
		learn:      func(string, peer.ID) {},
		peerOf:     func(string) (peer.ID, bool) { return "", false },
		returned:   func(string) {},
		beat:       func(string) {},
		request:    func(*pubsub.Item) {},
	}
}

// followAll subscribes the followers of g: transitions and events, beats when asked, and the
// group requests of AllGroup.
func (m *meshPart) followAll(g gossiper, beats bool) {
	m.follow(g, []pubsub.Kind{pubsub.KindTransition, pubsub.KindEvent}, followBuffer,
		"liveness transitions unavailable; agents are learnt from direct messages and the DHT only", m.heardItem)
	if beats {
		// Beats of recipients in backoff (heardBeat), on a subscription of their own: a burst
		// of beats fills it, never the one that carries transitions and revocations.
		m.follow(g, []pubsub.Kind{pubsub.KindHeartbeat}, followBuffer, "beats unavailable; recipients in backoff wait for it", m.heardBeat)
	}
	m.serveGroups(g) // broadcast queries (askserve.go)
}

// follow subscribes to g's items of kinds, buffered up to buffer, and adds the loop that
// hands each to take until its context ends; unavailable says what the node does without
// them.
func (m *meshPart) follow(g gossiper, kinds []pubsub.Kind, buffer int, unavailable string, take func(*pubsub.Item)) {
	sub, err := g.Subscribe(pubsub.Filter{Kinds: kinds}, buffer)
	if err != nil {
		m.log.Warn(unavailable, "err", err.Error())
		return
	}
	m.loops = append(m.loops, func(ctx context.Context) {
		defer sub.Cancel()
		for {
			select {
			case <-ctx.Done():
				return
			case it, ok := <-sub.C():
				if !ok {
					return
				}
				take(it)
			}
		}
	})
}

// heardItem takes a liveness transition, or an event for trust (revocation lists).
func (m *meshPart) heardItem(it *pubsub.Item) {
	if it.Kind == pubsub.KindEvent {
		m.hooks.heardEvent(it.Event, it.Author)
		return
	}
	m.heardLiveness(it.Transition)
}

// heardLiveness has the delivery engine retry an agent's queue at once when gossip's
// liveness says it came back alive or busy. Gossip alone binds nothing: a heartbeat refreshes
// where an agent is only when its id is already bound to the peer that signed it (a direct
// message the node accepted pinned it, or the allowlist names it), and a heartbeat of a peer
// other than the bound one is recorded as a trust conflict and otherwise ignored.
func (m *meshPart) heardLiveness(tr pubsub.Transition) {
	if to := tr.To; to != pubsub.StateAlive && to != pubsub.StateBusy {
		return
	}
	if tr.AgentID == m.agentID {
		return
	}
	learn, err := m.hooks.heard(tr.AgentID, tr.PeerID)
	if err != nil {
		return
	}
	if learn {
		m.hooks.learn(tr.AgentID, tr.PeerID)
	}
	m.hooks.returned(tr.AgentID)
}

// heardBeat tells the delivery engine of a beat (delivery.Engine.AgentHeard), when it comes
// from the peer the node would deliver the agent's messages to, or the node knows no peer of
// the agent (it left, and is resolved again): a recipient whose last attempt failed is then
// retried at once, even when its liveness row did not change (it restarted before anyone
// suspected it). The beat binds nothing: the retry resolves the agent as any attempt does. A
// beat of another peer than the one the directory names changes nothing.
func (m *meshPart) heardBeat(it *pubsub.Item) {
	if it.Message == nil {
		return
	}
	agent := it.Message.Envelope.Sender.AgentID
	if p, ok := m.hooks.peerOf(agent); !ok || p == it.Author {
		m.hooks.beat(agent)
	}
}
