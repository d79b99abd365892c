package node

import (
	"context"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/discovery"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
)

// The mesh's two optional parts, each behind the little the mesh uses of it: gossip
// (pubsub.Gossip) and discovery (discovery.Discovery). A part switched off is a do-nothing
// implementation, as memberlist's absent delegates are: it knows no agent, publishes and
// announces nothing, and refuses with CAPABILITY_MISMATCH what a caller must hear about (a
// broadcast, a subscription, a lookup). Nobody asks whether a part is on but the face
// (GossipOn, DiscoveryOn) and the broadcast query, which refuses before it checks its options.

// gossiper is what the mesh uses of gossip.
type gossiper interface {
	on() bool
	Agents() []pubsub.AgentState
	Agent(agentID string) (pubsub.AgentState, bool)
	Load(agentID string) (load float64, alive bool, known bool)
	TopicPeers() (heartbeat, broadcast int)
	Health() pubsub.Health
	Stats() pubsub.Stats
	SetStatus(status string, load float64, activeTasks int) error
	Watch(agentID string, p peer.ID)
	Forget(agentID string, p peer.ID, why string) bool
	// publish broadcasts an event the node itself raises (trust's revocation lists): off, it
	// publishes nothing and says nothing.
	publish(ctx context.Context, ev protocol.EventPayload) error
	Broadcast(ctx context.Context, ev protocol.EventPayload, opts ...protocol.Option) (*protocol.Message, error)
	SendToGroup(ctx context.Context, capability string, intent protocol.Intent, payload any, opts ...protocol.Option) (*protocol.Message, error)
	JoinGroup(capability string) error
	Subscribe(f pubsub.Filter, buffer int) (*pubsub.Subscription, error)
	SubscribeFunc(f pubsub.Filter, offer func(*pubsub.Item) bool, ended func()) (*pubsub.Subscription, error)
	Drain(ctx context.Context) error
	Leave(ctx context.Context) error
	Close() error
}

// finder is what the mesh uses of discovery.
type finder interface {
	on() bool
	Resolve(ctx context.Context, agentID string) (discovery.Record, error)
	Query(ctx context.Context, q protocol.CapabilityQuery) ([]discovery.Match, error)
	FindByCapability(ctx context.Context, kind, name string) ([]discovery.Record, error)
	Status() discovery.Status
	StoreStats() discovery.StoreStats
	Announce(m protocol.Manifest) error
	Leave(ctx context.Context) error
	Close() error
}

var (
	_ gossiper = liveGossip{}
	_ gossiper = offGossip{}
	_ finder   = liveDiscovery{}
	_ finder   = offDiscovery{}
)

// liveGossip is gossip switched on.
type liveGossip struct{ *pubsub.Gossip }

func (liveGossip) on() bool { return true }

func (g liveGossip) publish(ctx context.Context, ev protocol.EventPayload) error {
	_, err := g.Broadcast(ctx, ev)
	return err
}

// offGossip stands in for gossip switched off (and before the mesh starts).
type offGossip struct{}

func errGossipOff(what string) error {
	return protocol.Errorf(protocol.CodeCapabilityMismatch, "%s needs gossip, which is off on this node: start it with gossip on", what)
}

func (offGossip) on() bool                                             { return false }
func (offGossip) Agents() []pubsub.AgentState                          { return nil }
func (offGossip) Agent(string) (pubsub.AgentState, bool)               { return pubsub.AgentState{}, false }
func (offGossip) Load(string) (float64, bool, bool)                    { return 0, false, false }
func (offGossip) TopicPeers() (int, int)                               { return 0, 0 }
func (offGossip) Health() pubsub.Health                                { return pubsub.Health{} }
func (offGossip) Stats() pubsub.Stats                                  { return pubsub.Stats{} }
func (offGossip) SetStatus(string, float64, int) error                 { return nil }
func (offGossip) Watch(string, peer.ID)                                {}
func (offGossip) Forget(string, peer.ID, string) bool                  { return false }
func (offGossip) publish(context.Context, protocol.EventPayload) error { return nil }
func (offGossip) JoinGroup(string) error                               { return nil }
func (offGossip) Drain(context.Context) error                          { return nil }
func (offGossip) Leave(context.Context) error                          { return nil }
func (offGossip) Close() error                                         { return nil }

func (offGossip) Broadcast(context.Context, protocol.EventPayload, ...protocol.Option) (*protocol.Message, error) {
	return nil, errGossipOff("a broadcast")
}

func (offGossip) SendToGroup(context.Context, string, protocol.Intent, any, ...protocol.Option) (*protocol.Message, error) {
	return nil, errGossipOff("a group message")
}

func (offGossip) Subscribe(pubsub.Filter, int) (*pubsub.Subscription, error) {
	return nil, errGossipOff("an event subscription")
}

func (offGossip) SubscribeFunc(pubsub.Filter, func(*pubsub.Item) bool, func()) (*pubsub.Subscription, error) {
	return nil, errGossipOff("an event subscription")
}

// liveDiscovery is discovery switched on.
type liveDiscovery struct{ *discovery.Discovery }

func (liveDiscovery) on() bool { return true }

// offDiscovery stands in for discovery switched off.
type offDiscovery struct{}

func errDiscoveryOff(what string) error {
	return protocol.Errorf(protocol.CodeCapabilityMismatch, "%s needs discovery, which is off on this node: start it with discovery on to query the DHT", what)
}

func (offDiscovery) on() bool                         { return false }
func (offDiscovery) Status() discovery.Status         { return discovery.Status{} }
func (offDiscovery) StoreStats() discovery.StoreStats { return discovery.StoreStats{} }
func (offDiscovery) Announce(protocol.Manifest) error { return nil }
func (offDiscovery) Leave(context.Context) error      { return nil }
func (offDiscovery) Close() error                     { return nil }

func (offDiscovery) Resolve(context.Context, string) (discovery.Record, error) {
	return discovery.Record{}, errDiscoveryOff("resolving an agent")
}

func (offDiscovery) Query(context.Context, protocol.CapabilityQuery) ([]discovery.Match, error) {
	return nil, errDiscoveryOff("a capability query")
}

func (offDiscovery) FindByCapability(context.Context, string, string) ([]discovery.Record, error) {
	return nil, errDiscoveryOff("a capability lookup")
}
