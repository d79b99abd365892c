package pubsub

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
)

// slowBus is an event bus whose subscriptions to several types take a while, as they do
// when the bus is busy, and which counts how many of them overlapped.
type slowBus struct {
	event.Bus
	multi testsupport.Gauge // subscriptions to several types under way
	done  atomic.Int32      // and ended
}

func (b *slowBus) Subscribe(eventType any, opts ...event.SubscriptionOpt) (event.Subscription, error) {
	types, many := eventType.([]any)
	if !many || len(types) < 2 {
		return b.Bus.Subscribe(eventType, opts...)
	}
	b.multi.Enter()
	defer b.done.Add(1)
	defer b.multi.Leave()
	time.Sleep(50 * time.Millisecond) // the window between the first type and the last
	return b.Bus.Subscribe(eventType, opts...)
}

type slowBusHost struct {
	host.Host
	bus *slowBus
}

func (h slowBusHost) EventBus() event.Bus { return h.bus }

// gossipsub subscribes twice to peer identifications, each time with a second type; done at
// once, the two can wedge the host's event bus while it identifies many peers (see
// oneSubscriberHost). The gossip layer makes them one after the other.
func TestGossip_SubscribesToTheEventBusOneSubscriptionAtATime(t *testing.T) {
	net := testsupport.Mocknet(t, 1)
	bus := &slowBus{Bus: net.Hosts[0].EventBus()}
	b, err := protocol.NewBuilder("test:bus:agent", net.Keys[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(slowBusHost{Host: net.Hosts[0], bus: bus}, b, WithHeartbeatInterval(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	testsupport.WaitFor(t, 10*time.Second, "gossipsub's two subscriptions to several event types", func() bool {
		return bus.done.Load() >= 2
	})
	if _, most := bus.multi.Counts(); most != 1 {
		t.Fatalf("%d of gossipsub's %d subscriptions to several types ran at once; want one at a time", most, bus.done.Load())
	}
}
