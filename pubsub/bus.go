package pubsub

import (
	"sync"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
)

// oneSubscriberHost is the host gossipsub is given: the node's host, whose event bus takes
// gossipsub's subscriptions one at a time.
//
// gossipsub starts two goroutines that each subscribe to two event types, both beginning
// with EvtPeerIdentificationCompleted (go-libp2p-pubsub v0.17.0: manageAddrBook and
// watchForNewPeers). go-libp2p's bus (v0.51.0) registers a subscription's channel one type at
// a time, taking the bus lock and then the type's lock for each, and nobody reads the channel
// until the last type is registered. When both run while the host identifies many peers (a
// node that starts or restarts in a busy mesh), the bus can wedge for good:
//
//   - the first subscription's channel, registered for identifications, fills (16 events)
//     before it registers its second type, and the identify emitter blocks on it, holding the
//     identification type's lock;
//   - the second subscription holds the bus lock and waits for that type's lock;
//   - the first waits for the bus lock to register its second type.
//
// Every identification of the host then waits forever (473 of them in one node of a 300-node
// simulation, docs/scale.md). Taking the two subscriptions one after the other breaks the cycle:
// while the first registers, nobody holds the bus lock waiting on a type the first has
// registered.
type oneSubscriberHost struct {
	host.Host
	bus *oneSubscriberBus
}

func newOneSubscriberHost(h host.Host) *oneSubscriberHost {
	return &oneSubscriberHost{Host: h, bus: &oneSubscriberBus{Bus: h.EventBus()}}
}

// EventBus returns the host's bus, with Subscribe serialised.
func (h *oneSubscriberHost) EventBus() event.Bus { return h.bus }

// oneSubscriberBus is an event bus whose Subscribe calls run one at a time.
type oneSubscriberBus struct {
	event.Bus
	mu sync.Mutex
}

// Subscribe subscribes on the underlying bus once no other Subscribe through this bus is
// under way.
func (b *oneSubscriberBus) Subscribe(eventType any, opts ...event.SubscriptionOpt) (event.Subscription, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Bus.Subscribe(eventType, opts...)
}
