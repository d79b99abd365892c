package discovery

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

func TestCacheExpiryAndSeq(t *testing.T) {
	clock := newFakeClock()
	c := newCache(clock.Now, time.Minute, 100, Validator{Namespace: AgentNamespace, Now: clock.Now})
	_, id := testKey(t)
	r5 := testRecord(id, 5, clock.Now().Add(time.Hour))
	c.put(r5)
	if got, ok := c.lookup(r5.AgentID); !ok || got.Seq != 5 {
		t.Fatalf("lookup after put = %v, %v", got.Seq, ok)
	}
	if got, ok := c.lookupPeer(id); !ok || got.AgentID != r5.AgentID {
		t.Fatalf("lookupPeer after put = %v, %v", got, ok)
	}
	// a lower seq seen later does not replace the cached record
	if got := c.put(testRecord(id, 3, clock.Now().Add(time.Hour))); got.Seq != 5 {
		t.Fatalf("stale record replaced the cached one: seq %d", got.Seq)
	}
	// a higher seq does
	c.put(testRecord(id, 8, clock.Now().Add(time.Hour)))
	if got, _ := c.lookup(r5.AgentID); got.Seq != 8 {
		t.Fatalf("higher seq did not replace: %d", got.Seq)
	}
	clock.Advance(59 * time.Second)
	if _, ok := c.lookup(r5.AgentID); !ok {
		t.Fatal("entry gone before the cache TTL")
	}
	clock.Advance(time.Second)
	if _, ok := c.lookup(r5.AgentID); ok {
		t.Fatal("entry served after the cache TTL")
	}
	if _, ok := c.lookupPeer(id); ok {
		t.Fatal("peer index served after the cache TTL")
	}
}

func TestCacheRecordExpiryBoundsEntry(t *testing.T) {
	clock := newFakeClock()
	c := newCache(clock.Now, time.Minute, 100, Validator{Namespace: AgentNamespace, Now: clock.Now})
	_, id := testKey(t)
	c.put(testRecord(id, 1, clock.Now().Add(10*time.Second)))
	clock.Advance(10 * time.Second)
	if _, ok := c.lookup(agentID(1)); ok {
		t.Fatal("served a record past its own expiry")
	}
}

func TestCacheLeftEvictsAndTombstones(t *testing.T) {
	clock := newFakeClock()
	c := newCache(clock.Now, time.Minute, 100, Validator{Namespace: AgentNamespace, Now: clock.Now})
	_, id := testKey(t)
	c.put(testRecord(id, 5, clock.Now().Add(time.Hour)))
	left := testRecord(id, 6, clock.Now().Add(time.Hour))
	left.Left = true
	c.put(left)
	got, ok := c.lookup(agentID(1))
	if !ok || !got.Left {
		t.Fatalf("after a left record: %+v, %v; want a tombstone", got, ok)
	}
	if _, err := live(got); err == nil {
		t.Fatal("a tombstone resolved")
	}
	// a stale copy from a slow DHT peer cannot bring the agent back
	if got := c.put(testRecord(id, 5, clock.Now().Add(time.Hour))); !got.Left {
		t.Fatal("a stale record overrode the tombstone")
	}
	// the agent coming back with a newer record does
	if got := c.put(testRecord(id, 7, clock.Now().Add(time.Hour))); got.Left {
		t.Fatal("a newer record did not replace the tombstone")
	}
}

func TestCacheDisabledAndBounded(t *testing.T) {
	clock := newFakeClock()
	off := newCache(clock.Now, 0, 100, Validator{Namespace: AgentNamespace, Now: clock.Now})
	_, id := testKey(t)
	off.put(testRecord(id, 1, clock.Now().Add(time.Hour)))
	off.putProviders(capability{KindTool, "web"}, []peer.ID{id})
	if _, ok := off.lookup(agentID(1)); ok {
		t.Fatal("a zero-TTL cache cached")
	}
	if _, ok := off.providersOf(capability{KindTool, "web"}); ok {
		t.Fatal("a zero-TTL cache cached providers")
	}
	small := newCache(clock.Now, time.Minute, 3, Validator{Namespace: AgentNamespace, Now: clock.Now})
	for i := range 10 {
		_, id := testKey(t)
		r := testRecord(id, 1, clock.Now().Add(time.Hour))
		r.AgentID = agentID(i)
		small.put(r)
		clock.Advance(time.Second)
	}
	if n := small.len(); n != 3 {
		t.Fatalf("cache of size 3 holds %d", n)
	}
	if _, ok := small.lookup(agentID(9)); !ok {
		t.Fatal("the newest entry was evicted")
	}
}

func TestCacheProviders(t *testing.T) {
	clock := newFakeClock()
	c := newCache(clock.Now, time.Minute, 100, Validator{Namespace: AgentNamespace, Now: clock.Now})
	_, id := testKey(t)
	web := capability{KindTool, "web"}
	c.putProviders(web, nil)
	if _, ok := c.providersOf(web); ok {
		t.Fatal("an empty provider set was cached")
	}
	c.putProviders(web, []peer.ID{id})
	if ps, ok := c.providersOf(web); !ok || len(ps) != 1 {
		t.Fatalf("providersOf = %v, %v", ps, ok)
	}
	clock.Advance(time.Minute)
	if _, ok := c.providersOf(web); ok {
		t.Fatal("providers served after the TTL")
	}
}
