package pubsub

import (
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
)

// A consumer with a queue of its own (SubscribeFunc) is offered the items its filter selects,
// and those it refuses count as dropped; ended runs once, at Cancel, and nothing is offered
// after it.
func TestSubscribeFunc_OffersToTheConsumersQueueAndCountsWhatItRefuses(t *testing.T) {
	m := newMesh(t, 2, nil)
	var mu sync.Mutex
	var taken []*Item
	offered, ends := 0, 0
	sub, err := m.nodes[1].SubscribeFunc(Filter{Kinds: []Kind{KindHeartbeat}}, func(it *Item) bool {
		mu.Lock()
		defer mu.Unlock()
		if ends > 0 {
			t.Error("an item was offered after the subscription ended")
		}
		offered++
		if len(taken) == 1 {
			return false // the consumer's queue holds one
		}
		taken = append(taken, it)
		return true
	}, func() {
		mu.Lock()
		defer mu.Unlock()
		ends++
	})
	if err != nil {
		t.Fatal(err)
	}
	if sub.C() != nil {
		t.Fatal("a SubscribeFunc has a channel too")
	}
	testsupport.WaitFor(t, 20*time.Second, "three beats offered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return offered >= 3
	})
	sub.Cancel()
	sub.Cancel()
	mu.Lock()
	defer mu.Unlock()
	if taken[0].Kind != KindHeartbeat {
		t.Fatalf("offered a %s item to a filter of heartbeats", taken[0].Kind)
	}
	if got := sub.Dropped(); got != uint64(offered-1) {
		t.Fatalf("dropped %d of %d offered, one taken; want %d", got, offered, offered-1)
	}
	if ends != 1 {
		t.Fatalf("ended ran %d times; want once", ends)
	}
}
