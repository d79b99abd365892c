package protocol_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

func uuidN(i int) string { return fmt.Sprintf("0190f5a4-7c3e-7000-8000-%012d", i) }

func TestSecurity_ReplayWindow_DuplicateWithinTTLIsRefused(t *testing.T) {
	w := protocol.NewReplayWindow(10)
	exp := fixedNow.Add(time.Minute)
	if err := w.Add(uuidN(1), "peer-a", exp, fixedNow); err != nil {
		t.Fatal(err)
	}
	err := w.Add(uuidN(1), "peer-a", exp, fixedNow.Add(59*time.Second))
	wantCode(t, err, protocol.CodeDuplicate)
	if !w.Seen(uuidN(1), fixedNow) || w.Seen(uuidN(2), fixedNow) {
		t.Fatal("Seen disagrees with Add")
	}
	// Upper- and lower-case spellings of one UUID are one id.
	wantCode(t, w.Add("0190F5A4-7C3E-7000-8000-000000000001", "peer-a", exp, fixedNow), protocol.CodeDuplicate)
}

func TestSecurity_ReplayWindow_AcceptedAfterExpiry(t *testing.T) {
	w := protocol.NewReplayWindow(10)
	exp := fixedNow.Add(time.Minute)
	if err := w.Add(uuidN(1), "peer-a", exp, fixedNow); err != nil {
		t.Fatal(err)
	}
	if w.Seen(uuidN(1), exp) {
		t.Fatal("id still seen at its expiry")
	}
	// By then Validate refuses the message itself as TIMEOUT; the window only has to forget.
	if err := w.Add(uuidN(1), "peer-a", exp.Add(time.Minute), exp); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if w.Len() != 1 {
		t.Fatalf("Len = %d, want 1 (the expired entry purged)", w.Len())
	}
}

func TestSecurity_ReplayWindow_OneOwnerFillingItIsRefusedWithRetryAfter(t *testing.T) {
	w := protocol.NewReplayWindow(3)
	for i := 1; i <= 3; i++ {
		if err := w.Add(uuidN(i), "peer-a", fixedNow.Add(time.Duration(i)*time.Minute), fixedNow); err != nil {
			t.Fatal(err)
		}
	}
	err := w.Add(uuidN(4), "peer-a", fixedNow.Add(time.Hour), fixedNow)
	pe := wantCode(t, err, protocol.CodeRateLimited)
	if pe.RetryAfter != time.Minute {
		t.Fatalf("RetryAfter = %v, want 1m (when the oldest id expires)", pe.RetryAfter)
	}
	if !protocol.CodeRateLimited.Retryable() {
		t.Fatal("RATE_LIMITED is not retryable")
	}
	// Nothing was forgotten to make room: the remembered ids are still duplicates.
	wantCode(t, w.Add(uuidN(1), "peer-a", fixedNow.Add(time.Minute), fixedNow), protocol.CodeDuplicate)
	// Once the oldest expires there is room again.
	if err := w.Add(uuidN(4), "peer-a", fixedNow.Add(time.Hour), fixedNow.Add(time.Minute)); err != nil {
		t.Fatalf("after the oldest expired: %v", err)
	}
}

func TestSecurity_ReplayWindow_RemoveForgets(t *testing.T) {
	w := protocol.NewReplayWindow(2)
	exp := fixedNow.Add(time.Hour)
	_ = w.Add(uuidN(1), "peer-a", fixedNow.Add(time.Minute), fixedNow)
	_ = w.Add(uuidN(2), "peer-a", exp, fixedNow)
	w.Remove(uuidN(1))
	w.Remove("not a uuid") // ignored
	if w.Seen(uuidN(1), fixedNow) || w.Len() != 1 {
		t.Fatal("Remove did not forget")
	}
	if err := w.Add(uuidN(1), "peer-a", exp, fixedNow); err != nil {
		t.Fatalf("re-adding a removed id: %v", err)
	}
	// Full again; RetryAfter must come from a live id, not from the removed entry's expiry.
	pe := wantCode(t, w.Add(uuidN(3), "peer-a", exp, fixedNow), protocol.CodeRateLimited)
	if pe.RetryAfter != time.Hour {
		t.Fatalf("RetryAfter = %v, want 1h", pe.RetryAfter)
	}
}

func TestSecurity_ReplayWindow_SnapshotRestoreRoundTrip(t *testing.T) {
	w := protocol.NewReplayWindow(10)
	for i := 1; i <= 5; i++ {
		if err := w.Add(uuidN(i), "peer-a", fixedNow.Add(time.Duration(6-i)*time.Minute), fixedNow); err != nil {
			t.Fatal(err)
		}
	}
	later := fixedNow.Add(90 * time.Second) // ids 4 (2m) and 5 (1m): 5 expired
	snap := w.Snapshot(later)
	if len(snap) != 4 {
		t.Fatalf("Snapshot has %d entries, want 4", len(snap))
	}
	for i := 1; i < len(snap); i++ {
		if snap[i].Expires.Before(snap[i-1].Expires) {
			t.Fatal("Snapshot is not ordered by expiry")
		}
	}
	r := protocol.NewReplayWindow(10)
	if dropped := r.Restore(snap, later); dropped != 0 {
		t.Fatalf("dropped %d", dropped)
	}
	for i := 1; i <= 4; i++ {
		wantCode(t, r.Add(uuidN(i), "peer-a", fixedNow.Add(time.Hour), later), protocol.CodeDuplicate)
	}
	if err := r.Add(uuidN(5), "peer-a", fixedNow.Add(time.Hour), later); err != nil {
		t.Fatalf("the expired id was restored: %v", err)
	}
	// A smaller window keeps the entries that expire first and reports the rest.
	small := protocol.NewReplayWindow(2)
	if dropped := small.Restore(snap, later); dropped != 2 || small.Len() != 2 {
		t.Fatalf("dropped %d, len %d", dropped, small.Len())
	}
	if !small.Seen(snap[0].ID, later) || small.Seen(snap[3].ID, later) {
		t.Fatal("Restore kept the wrong entries")
	}
	// Entries already expired at restore time, and garbage, are skipped.
	if small := protocol.NewReplayWindow(2); small.Restore([]protocol.ReplayEntry{{ID: "x", Expires: later.Add(time.Hour)}, {ID: uuidN(9), Expires: later}}, later) != 0 || small.Len() != 0 {
		t.Fatal("Restore took an expired or malformed entry")
	}
}

func TestSecurity_ReplayWindow_RefusesNonUUID(t *testing.T) {
	wantCode(t, protocol.NewReplayWindow(1).Add("nope", "peer-a", fixedNow.Add(time.Hour), fixedNow), protocol.CodePayloadInvalid)
}

func TestSecurity_ReplayWindow_DefaultCapacity(t *testing.T) {
	if got := protocol.NewReplayWindow(0).Capacity(); got != protocol.DefaultReplayCapacity {
		t.Fatalf("Capacity = %d", got)
	}
}

// Many goroutines adding the same ids: each id is accepted exactly once.
func TestSecurity_ReplayWindow_ConcurrentAddsAcceptEachIDOnce(t *testing.T) {
	w := protocol.NewReplayWindow(1000)
	var mu sync.Mutex
	accepted := map[string]int{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				if w.Add(uuidN(i), "peer-a", fixedNow.Add(time.Hour), fixedNow) == nil {
					mu.Lock()
					accepted[uuidN(i)]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(accepted) != 100 {
		t.Fatalf("%d ids accepted, want 100", len(accepted))
	}
	for id, n := range accepted {
		if n != 1 {
			t.Fatalf("%s accepted %d times", id, n)
		}
	}
}

// One peer filling the window is refused itself; every other peer still gets in,
// at the expense of the ids of the peer that holds the most.
func TestSecurity_ReplayWindow_FullWindowRefusesTheOwnerThatFilledIt(t *testing.T) {
	w := protocol.NewReplayWindow(4)
	exp := fixedNow.Add(time.Hour)
	for i := 1; i <= 4; i++ {
		if err := w.Add(uuidN(i), "flooder", exp.Add(time.Duration(i)*time.Second), fixedNow); err != nil {
			t.Fatal(err)
		}
	}
	pe := wantCode(t, w.Add(uuidN(5), "flooder", exp, fixedNow), protocol.CodeRateLimited)
	if pe.RetryAfter != time.Hour+time.Second {
		t.Fatalf("RetryAfter = %v, want 1h1s (when the flooder's own oldest id expires)", pe.RetryAfter)
	}
	for i := 10; i < 12; i++ {
		if err := w.Add(uuidN(i), "honest", exp, fixedNow); err != nil {
			t.Fatalf("an honest peer was refused because another filled the window: %v", err)
		}
	}
	if w.Len() != 4 || w.OwnerLen("flooder") != 2 || w.OwnerLen("honest") != 2 || w.Evicted() != 2 {
		t.Fatalf("len %d, flooder %d, honest %d, evicted %d; want 4, 2, 2, 2",
			w.Len(), w.OwnerLen("flooder"), w.OwnerLen("honest"), w.Evicted())
	}
	// The honest peer now holds as many as the flooder: its next id is refused too, while a
	// third peer still gets in, at the expense of one of them.
	wantCode(t, w.Add(uuidN(12), "honest", exp, fixedNow), protocol.CodeRateLimited)
	if err := w.Add(uuidN(13), "third", exp, fixedNow); err != nil {
		t.Fatal(err)
	}
	if w.OwnerLen("flooder")+w.OwnerLen("honest") != 3 || w.OwnerLen("third") != 1 {
		t.Fatalf("flooder %d, honest %d, third %d", w.OwnerLen("flooder"), w.OwnerLen("honest"), w.OwnerLen("third"))
	}
	// Ids that were not evicted are still duplicates.
	wantCode(t, w.Add(uuidN(13), "third", exp, fixedNow), protocol.CodeDuplicate)
}

func TestSecurity_ReplayWindow_SnapshotKeepsOwners(t *testing.T) {
	w := protocol.NewReplayWindow(10)
	_ = w.Add(uuidN(1), "a", fixedNow.Add(time.Minute), fixedNow)
	_ = w.Add(uuidN(2), "b", fixedNow.Add(2*time.Minute), fixedNow)
	r := protocol.NewReplayWindow(10)
	r.Restore(w.Snapshot(fixedNow), fixedNow)
	if r.OwnerLen("a") != 1 || r.OwnerLen("b") != 1 {
		t.Fatalf("owners after restore: a %d, b %d", r.OwnerLen("a"), r.OwnerLen("b"))
	}
	w.Remove(uuidN(1))
	if w.OwnerLen("a") != 0 {
		t.Fatal("Remove did not uncharge the owner")
	}
}

// A full window costs the peer that fills it logarithmic time per message, not a walk of the
// window under its lock (which stalled every other peer's checks): 100,000 refusals of the
// largest owner, and as many makes-room for another, fit in the test's time.
func TestSecurity_ReplayWindow_AFullWindowStaysCheap(t *testing.T) {
	const capacity = 1 << 16
	w := protocol.NewReplayWindow(capacity)
	exp := fixedNow.Add(time.Hour)
	for i := 0; i < capacity; i++ {
		if err := w.Add(uuidN(i), "flooder", exp.Add(time.Duration(i)), fixedNow); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 100_000; i++ {
		if w.Add(uuidN(capacity+i), "flooder", exp, fixedNow) == nil {
			t.Fatal("the peer holding the whole window was let in")
		}
	}
	for i := 0; i < capacity/2; i++ {
		if err := w.Add(uuidN(2*capacity+i), fmt.Sprintf("honest-%d", i%8), exp, fixedNow); err != nil {
			t.Fatalf("honest %d: %v", i, err)
		}
	}
	if w.OwnerLen("flooder") != capacity/2 || w.Evicted() != capacity/2 {
		t.Fatalf("flooder holds %d, %d evicted", w.OwnerLen("flooder"), w.Evicted())
	}
	// The flooder's earliest ids went first.
	if !w.Seen(uuidN(capacity-1), fixedNow) || w.Seen(uuidN(0), fixedNow) {
		t.Fatal("eviction did not take the flooder's earliest-expiring ids")
	}
}

// Peer identities cost an attacker nothing, so a full window may be held by as many owners as
// it has ids: finding the largest of them is still constant time. 100,000 newcomers each make
// room in a window held by 65,536 owners of one id each (a walk of the owners per message
// would take minutes here), and the window never holds more than its capacity.
func TestSecurity_ReplayWindow_ManyOwnersStayCheap(t *testing.T) {
	const capacity = 1 << 16
	w := protocol.NewReplayWindow(capacity)
	exp := fixedNow.Add(time.Hour)
	for i := 0; i < capacity; i++ {
		if err := w.Add(uuidN(i), fmt.Sprintf("sybil-%d", i), exp, fixedNow); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 100_000; i++ {
		if err := w.Add(uuidN(capacity+i), fmt.Sprintf("newcomer-%d", i), exp, fixedNow); err != nil {
			t.Fatalf("newcomer %d: %v", i, err)
		}
	}
	if w.Len() != capacity || w.Evicted() != 100_000 {
		t.Fatalf("len %d, evicted %d", w.Len(), w.Evicted())
	}
	// Now a peer with two ids is the largest: its third is refused, and the window makes
	// room for someone else at its expense.
	_ = w.Add(uuidN(1_000_000), "pair", exp, fixedNow)
	_ = w.Add(uuidN(1_000_001), "pair", exp, fixedNow)
	wantCode(t, w.Add(uuidN(1_000_002), "pair", exp, fixedNow), protocol.CodeRateLimited)
	if err := w.Add(uuidN(1_000_003), "single", exp, fixedNow); err != nil {
		t.Fatal(err)
	}
	if w.OwnerLen("pair") != 1 {
		t.Fatalf("the largest owner holds %d ids after making room, want 1", w.OwnerLen("pair"))
	}
}
