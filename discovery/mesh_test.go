package discovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	record "github.com/libp2p/go-libp2p-record"
	"github.com/libp2p/go-libp2p/core/peer"
)

// expectedMatches is the brute-force answer to a query over manifestFor(0..n-1), in the
// documented order (no load source: preferred matches, then agent id).
func expectedMatches(q protocol.CapabilityQuery, n int, skip map[int]bool) []string {
	type cand struct {
		id   string
		pref int
	}
	var cs []cand
	for i := range n {
		if skip[i] {
			continue
		}
		set := manifestSet(manifestFor(i))
		ok := true
		for _, c := range capabilitiesOf(q.Required.Tools, q.Required.Models, q.Required.Domains) {
			ok = ok && set[c]
		}
		if q.Constraints.Locality != "" && manifestFor(i).Deployment != q.Constraints.Locality {
			ok = false
		}
		pref := 0
		for _, c := range capabilitiesOf(q.Preferred.Tools, q.Preferred.Models, q.Preferred.Domains) {
			if set[c] {
				pref++
			}
		}
		if ok && (len(capabilitiesOf(q.Required.Tools, q.Required.Models, q.Required.Domains)) > 0 || pref > 0) {
			cs = append(cs, cand{agentID(i), pref})
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].pref != cs[j].pref {
			return cs[i].pref > cs[j].pref
		}
		return cs[i].id < cs[j].id
	})
	var out []string
	for _, c := range cs {
		out = append(out, c.id)
	}
	return out
}

var meshQueries = []protocol.CapabilityQuery{
	{Required: protocol.CapabilitySet{Tools: []string{"terminal", "web"}, Models: []string{"llama3"}},
		Preferred: protocol.CapabilitySet{Domains: []string{"security", "compliance"}}},
	{Required: protocol.CapabilitySet{Tools: []string{"browser"}}, Preferred: protocol.CapabilitySet{Domains: []string{"compliance"}},
		Constraints: protocol.QueryConstraints{Locality: "cloud"}},
	{Preferred: protocol.CapabilitySet{Domains: []string{"security"}, Tools: []string{"browser"}}},
	{Required: protocol.CapabilitySet{Tools: []string{"nonexistent"}}},
}

// TestMeshTwentyNodes joins 20 nodes through 2 bootstrap peers, publishes an agent on each and
// checks that every agent resolves from every node, that queries return exactly the matching
// agents in the documented order, and that stopping a bootstrap peer breaks no lookup. The cache
// is off so that every lookup walks the DHT.
func TestMeshTwentyNodes(t *testing.T) {
	const n = 20
	m := newMesh(t, n, 2, WithCacheTTL(0))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	m.waitJoined(t)
	m.publishAll(t, ctx)

	resolveAll := func(skip map[int]bool, stride int) {
		m.parallel(t, 4, n, func(from int) error {
			if skip[from] {
				return nil
			}
			for to := from % stride; to < n; to += stride {
				r, err := m.ds[from].Resolve(ctx, agentID(to))
				if err != nil {
					return fmt.Errorf("node %d resolving %s: %w", from, agentID(to), err)
				}
				if r.PeerID != m.hosts[to].ID() || r.Manifest.AgentID != agentID(to) || len(r.Addrs) == 0 {
					return fmt.Errorf("node %d resolved %s to %s %v", from, agentID(to), r.PeerID, r.Addrs)
				}
			}
			return nil
		})
	}
	// queries are asked from every fifth node (each a cold walk without the cache) to keep the
	// test short under -race.
	queryAll := func(skip map[int]bool) {
		m.parallel(t, 4, n, func(from int) error {
			if skip[from] || from%5 != 1 {
				return nil
			}
			for qi, q := range meshQueries {
				ms, err := m.ds[from].Query(ctx, q)
				if err != nil {
					return fmt.Errorf("node %d query %d: %w", from, qi, err)
				}
				// a stopped node's record stays in the DHT until it expires (it did not Leave), so
				// its agent is still a match.
				if got, want := ids(ms), expectedMatches(q, n, nil); !equal(got, want) {
					return fmt.Errorf("node %d query %d\n got %v\nwant %v", from, qi, got, want)
				}
			}
			recs, err := m.ds[from].FindByCapability(ctx, KindModel, "LLAMA3")
			if err != nil {
				return err
			}
			want := (n + 3) / 4
			if len(recs) != want {
				return fmt.Errorf("node %d found %d llama3 agents, want %d", from, len(recs), want)
			}
			return nil
		})
	}
	t0 := time.Now()
	resolveAll(nil, 1)
	t.Logf("resolveAll %s", time.Since(t0))
	t0 = time.Now()
	queryAll(nil)
	t.Logf("queryAll %s", time.Since(t0))

	// stop bootstrap peer 0 (its Discovery and its host): nothing else may break.
	stopped := map[int]bool{0: true}
	if err := m.ds[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.hosts[0].Close(); err != nil {
		t.Fatal(err)
	}
	m.isolate(m.hosts[0].ID())
	// every node resolves a quarter of the agents (each agent from 4 or 5 nodes), so that the
	// test stays short under -race; the first phase already resolved every pair.
	resolveAll(stopped, 4)
	queryAll(stopped)

	// and a node that joins now, through both bootstrap peers (one of them down), finds everyone.
	h, sk := m.mn.AddHost(t, hostPort+n)
	m.linkTo(t, h.ID(), m.hosts[0].ID())
	late, err := New(h, sk, WithLogger(quiet), WithBootstrapPeers(m.boot), WithCacheTTL(0),
		WithBackoff(5*time.Millisecond, 50*time.Millisecond), WithConnectTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m.ds = append(m.ds, late)
	testsupport.WaitFor(t, 30*time.Second, "late node joined", func() bool { return late.Status().Bootstrapped })
	// the first lookups of a node that has just joined need more than its bootstrap peer in its
	// routing table: wait for the refresh that follows the join.
	testsupport.WaitFor(t, 30*time.Second, "late node routing table filled", func() bool { return late.Status().RoutingTableSize >= 5 })
	st := late.Status()
	if st.BootstrapConfigured != 2 || st.BootstrapAnswered != 1 || st.LastError == "" {
		t.Fatalf("late node status %+v: want 1 of 2 bootstrap peers answered and an error naming the other", st)
	}
	for to := range n {
		if _, err := late.Resolve(ctx, agentID(to)); err != nil {
			t.Fatalf("late node resolving %s: %v", agentID(to), err)
		}
	}
}

// TestPublishLeaveAndRepublish: a republished record with a higher seq replaces the old one
// everywhere; Leave makes the agent unresolvable and drops it from capability results. Every
// record goes through the nodes' bounded stores, which the lookups read.
func TestPublishLeaveAndRepublish(t *testing.T) {
	m := newMesh(t, 6, 1, WithCacheTTL(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.waitJoined(t)
	m.publishAll(t, ctx)
	others := 0
	for i, d := range m.ds {
		st := d.StoreStats()
		mf := manifestFor(i)
		if want := 2 + len(capabilitiesOf(mf.Tools, mf.Models, mf.Domains)); st.LocalEntries != want {
			t.Fatalf("node %d store %+v: want its own %d records", i, st, want)
		}
		others += st.Entries - st.LocalEntries
	}
	if others == 0 {
		t.Fatal("no node stores another's record: the DHT does not write through the bounded store")
	}

	changed := manifestFor(3)
	changed.Tools = append(changed.Tools, "gpu")
	if err := m.ds[3].Publish(ctx, changed); err != nil {
		t.Fatal(err)
	}
	if err := m.ds[3].Publish(ctx, manifestFor(4)); err == nil {
		t.Fatal("a node published a second agent id without Leave")
	}
	for i := range m.ds {
		r, err := m.ds[i].Resolve(ctx, agentID(3))
		if err != nil {
			t.Fatal(err)
		}
		if r.Seq != m.ds[3].Status().Seq || !manifestSet(r.Manifest)[capability{KindTool, "gpu"}] {
			t.Fatalf("node %d resolved seq %d without the new tool; want seq %d", i, r.Seq, m.ds[3].Status().Seq)
		}
	}
	recs, err := m.ds[0].FindByCapability(ctx, KindTool, "gpu")
	if err != nil || len(recs) != 1 || recs[0].AgentID != agentID(3) {
		t.Fatalf("gpu providers = %v, %v", recs, err)
	}

	if err := m.ds[3].Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if !m.ds[3].Status().Left {
		t.Fatal("status does not say the agent left")
	}
	for i := range m.ds {
		if _, err := m.ds[i].Resolve(ctx, agentID(3)); !errors.Is(err, protocol.ErrAgentNotFound) {
			t.Fatalf("node %d resolved an agent that left: %v", i, err)
		}
	}
	recs, err = m.ds[1].FindByCapability(ctx, KindTool, "gpu")
	if err != nil || len(recs) != 0 {
		t.Fatalf("an agent that left is still found by capability: %v, %v", recs, err)
	}
	if _, err := m.ds[1].Resolve(ctx, "test:nobody:agent"); !errors.Is(err, protocol.ErrAgentNotFound) {
		t.Fatalf("unknown agent: %v", err)
	}
}

// acceptAll is the validator of a malicious node: it stores anything.
type acceptAll struct{}

func (acceptAll) Validate(string, []byte) error        { return nil }
func (acceptAll) Select(string, [][]byte) (int, error) { return 0, nil }

// TestForgedRecordNotServed: a malicious node that skips validation puts, through the DHT, a
// record naming a victim's peer id but signed with its own key (and a higher seq). Honest nodes
// refuse to store it and every lookup still returns the genuine record.
func TestForgedRecordNotServed(t *testing.T) {
	const n = 8
	m := newMesh(t, n, 1, WithCacheTTL(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.waitJoined(t)
	m.publishAll(t, ctx)
	genuine, err := m.ds[0].Resolve(ctx, agentID(2))
	if err != nil {
		t.Fatal(err)
	}

	evil, h, sk := m.addAttacker(t, ctx)

	forged := genuine
	forged.PeerID = h.ID()
	forged.Seq = genuine.Seq + 1_000_000
	val, err := SignRecord(forged, sk)
	if err != nil {
		t.Fatal(err)
	}
	// rewrite the peer id to the victim's: the signature is now the attacker's over a body
	// naming the victim.
	val = []byte(replaceAll(string(val), h.ID().String(), genuine.PeerID.String()))
	_ = evil.PutValue(ctx, AgentKey(agentID(2)), val)
	_ = evil.PutValue(ctx, PeerKey(genuine.PeerID), val)
	// and a malformed one, for good measure
	_ = evil.PutValue(ctx, AgentKey(agentID(3)), []byte(`{"record":{"v":1},"sig":"AAAA"}`))

	for i := range n {
		r, err := m.ds[i].Resolve(ctx, agentID(2))
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		if r.PeerID != genuine.PeerID || r.Seq < genuine.Seq {
			t.Fatalf("node %d was served a forged record: seq %d", i, r.Seq)
		}
		if _, err := m.ds[i].Resolve(ctx, agentID(3)); err != nil {
			t.Fatalf("node %d lost agent 3 to a malformed put: %v", i, err)
		}
	}
	// no honest store kept it: an observer (fresh store, records every value it receives) asks
	// every peer and must never receive the forged bytes.
	if err := evil.Close(); err != nil {
		t.Fatal(err)
	}
	_ = h.Close()
	m.isolate(h.ID())
	oh, _ := m.mn.AddHost(t, hostPort+98)
	m.linkTo(t, oh.ID(), h.ID())
	rv := &recorder{}
	observer, err := dht.New(oh, dht.Mode(dht.ModeClient), dht.ProtocolPrefix("/iacp"),
		dht.Validator(record.NamespacedValidator{AgentNamespace: rv, PeerNamespace: rv}))
	if err != nil {
		t.Fatal(err)
	}
	defer observer.Close()
	if err := oh.Connect(ctx, peer.AddrInfo{ID: m.hosts[0].ID(), Addrs: m.hosts[0].Addrs()}); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 10*time.Second, "observer routing table", func() bool { return observer.RoutingTable().Size() > 0 })
	for _, key := range []string{AgentKey(agentID(2)), PeerKey(genuine.PeerID)} {
		if _, err := observer.GetValue(ctx, key, dht.Quorum(0)); err != nil {
			t.Fatalf("observer %s: %v", key, err)
		}
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if rv.n == 0 {
		t.Fatal("the observer received no value at all; the check proves nothing")
	}
	for _, v := range rv.seen {
		if string(v) == string(val) {
			t.Fatal("an honest node served the forged record")
		}
	}
}

// recorder is a validator that accepts and remembers every value.
type recorder struct {
	mu   sync.Mutex
	n    int
	seen [][]byte
}

func (r *recorder) Validate(_ string, v []byte) error {
	r.mu.Lock()
	r.n++
	r.seen = append(r.seen, append([]byte(nil), v...))
	r.mu.Unlock()
	return nil
}
func (r *recorder) Select(string, [][]byte) (int, error) { return 0, nil }

func replaceAll(s, old, new string) string {
	out := ""
	for {
		i := indexOf(s, old)
		if i < 0 {
			return out + s
		}
		out += s[:i] + new
		s = s[i+len(old):]
	}
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// Gossip's peer source: the members of a capability group are the providers of that name
// under any kind, never the asking node itself; neighbours are routing-table peers, with
// addresses, bounded by the limit.
func TestPeerSource(t *testing.T) {
	m := newMesh(t, 12, 1, WithCacheTTL(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.waitJoined(t)
	m.publishAll(t, ctx)
	// manifestFor: every fourth agent has the llama3 model; every third the browser tool.
	for name, want := range map[string][]int{"llama3": {0, 4, 8}, "BROWSER": {0, 3, 6, 9}} {
		got, err := m.ds[0].CapabilityPeers(ctx, name, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, ai := range got {
			ids = append(ids, ai.ID.String())
			if len(ai.Addrs) == 0 {
				t.Errorf("%s: peer %s without addresses", name, ai.ID)
			}
		}
		var wantIDs []string
		for _, i := range want[1:] { // not node 0, which asks
			wantIDs = append(wantIDs, m.hosts[i].ID().String())
		}
		slices.Sort(ids)
		slices.Sort(wantIDs)
		if !slices.Equal(ids, wantIDs) {
			t.Errorf("%s: got %v, want %v", name, ids, wantIDs)
		}
	}
	if got, _ := m.ds[0].CapabilityPeers(ctx, "browser", 2); len(got) != 2 {
		t.Errorf("limit 2: got %d peers", len(got))
	}
	if got, err := m.ds[0].CapabilityPeers(ctx, "no-such-thing", 0); err != nil || len(got) != 0 {
		t.Errorf("unknown capability: %v, %v", got, err)
	}
	nb := m.ds[5].Neighbours(3)
	if len(nb) != 3 {
		t.Fatalf("neighbours: got %d, want 3", len(nb))
	}
	for _, ai := range nb {
		if ai.ID == m.hosts[5].ID() || len(ai.Addrs) == 0 {
			t.Fatalf("neighbour %+v", ai)
		}
	}
}

// Gossip's group search does not answer capability lookups: a search made before most agents
// had advertised (a node joins its groups as it starts, while the mesh forms) must not hide
// the agents that advertised after it from the next FindByCapability for the cache TTL.
func TestCapabilityLookupFindsAgentsThatAdvertisedAfterAGroupSearch(t *testing.T) {
	m := newMesh(t, 6, 1) // the default cache TTL, a minute
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.waitJoined(t)
	early := []int{1, 2}
	m.publish(t, ctx, early...)
	// manifestFor: every agent has the terminal tool.
	got, err := m.ds[0].CapabilityPeers(ctx, "terminal", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(early) {
		t.Fatalf("the group search found %d peers, want the %d that advertised", len(got), len(early))
	}
	m.publish(t, ctx, 3, 4, 5)
	recs, err := m.ds[0].FindByCapability(ctx, KindTool, "terminal")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.AgentID)
	}
	want := []string{agentID(1), agentID(2), agentID(3), agentID(4), agentID(5)}
	if !slices.Equal(ids, want) {
		t.Fatalf("FindByCapability after the group search: %v, want %v", ids, want)
	}
}

// Gossip's group search is searched again after 10 s while its answer changes (the mesh
// forming), and reused for the cache TTL (a minute) once the answer holds still, as capability
// lookups reuse theirs: gossipsub asks every second about each group it has too few peers of,
// and a node in a small group would otherwise walk the DHT three times (a walk per kind) every
// 10 s for as long as it runs.
func TestGroupSearchIsReusedForTheCacheTTLOnceItsAnswerHoldsStill(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	m := newMeshWith(t, 6, 1, func(i int, _ peer.ID) []Option {
		if i == 0 {
			return []Option{WithClock(clock.Now)}
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.waitJoined(t)
	members := func(after time.Duration, want int, why string) {
		t.Helper()
		clock.Advance(after)
		got, err := m.ds[0].CapabilityPeers(ctx, "terminal", 0) // manifestFor: everyone has it
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != want {
			t.Fatalf("%s: %d members, want %d", why, len(got), want)
		}
	}
	m.publish(t, ctx, 1, 2)
	members(0, 2, "the first search")
	m.publish(t, ctx, 3)
	members(11*time.Second, 3, "11 s later, searched again")
	members(11*time.Second, 3, "11 s later again, the same answer")
	m.publish(t, ctx, 4, 5)
	members(30*time.Second, 3, "30 s after an answer that held still, reused")
	members(31*time.Second, 5, "after the cache TTL, searched again")
}

// A group search takes the providers a capability lookup cached, without a walk of its own:
// a node that just looked a capability up (its agent about to message the group, say) has
// the group's members at once.
func TestGroupSearchTakesWhatALookupCached(t *testing.T) {
	m := newMesh(t, 5, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.waitJoined(t)
	m.publish(t, ctx, 1, 2)
	if recs, err := m.ds[0].FindByCapability(ctx, KindTool, "terminal"); err != nil || len(recs) != 2 {
		t.Fatalf("lookup: %d records, %v", len(recs), err)
	}
	m.publish(t, ctx, 3)
	got, err := m.ds[0].CapabilityPeers(ctx, "terminal", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("the group search found %d members; want the lookup's 2, taken from its cache", len(got))
	}
}

// An empty answer is never served from the cache: a query that matched nobody walks the DHT
// again the next time, so an agent that advertised since is found at once, not a cache TTL
// (a minute) later. Here a provider set cached by the first query (terminal: agent 1, who
// lacks web) would hide agent 2, who has both, from the second.
func TestEmptyQueryAnswerIsNotCached(t *testing.T) {
	m := newMesh(t, 4, 1) // the default cache TTL, a minute
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.waitJoined(t)
	m.publish(t, ctx, 1) // manifestFor: agent 1 has terminal, not web
	q := protocol.CapabilityQuery{Required: protocol.CapabilitySet{Tools: []string{"terminal", "web"}}}
	if got, err := m.ds[0].Query(ctx, q); err != nil || len(got) != 0 {
		t.Fatalf("the first query: %v, %v; want no match", got, err)
	}
	m.publish(t, ctx, 2) // agent 2 has terminal and web
	got, err := m.ds[0].Query(ctx, q)
	if err != nil || len(got) != 1 || got[0].Record.AgentID != agentID(2) {
		t.Fatalf("the query after agent 2 advertised: %v, %v; want agent 2", got, err)
	}
}

// An agent that republishes with new addresses (it reserved a relay, or moved) is found where
// it is now as soon as a peer that cached its old record reports it unreachable: the cache
// answers until then, the DHT after.
func TestUnreachablePeerIsResolvedAfreshFromTheDHT(t *testing.T) {
	m := newMesh(t, 4, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.waitJoined(t)
	m.publishAll(t, ctx)
	cachedAt := time.Now()
	old, err := m.ds[0].Resolve(ctx, agentID(3))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ds[3].Publish(ctx, manifestFor(3)); err != nil {
		t.Fatal(err)
	}
	now := m.ds[3].Status().Seq
	if now == old.Seq {
		t.Fatalf("the republish kept seq %d", now)
	}
	if r, _ := m.ds[0].Resolve(ctx, agentID(3)); r.Seq != old.Seq {
		t.Fatalf("resolved seq %d before any report; the test wants the cached %d", r.Seq, old.Seq)
	}
	if m.ds[0].Unreachable(agentID(3), old.PeerID, cachedAt) {
		t.Fatal("a report on a resolve that found the record in the DHT dropped it")
	}
	if m.ds[0].Unreachable(agentID(3), m.hosts[2].ID(), time.Now()) {
		t.Fatal("a report naming a peer the record does not name dropped it")
	}
	if !m.ds[0].Unreachable(agentID(3), old.PeerID, time.Now()) {
		t.Fatal("the cached record was not dropped")
	}
	r, err := m.ds[0].Resolve(ctx, agentID(3))
	if err != nil {
		t.Fatal(err)
	}
	if r.Seq != now {
		t.Fatalf("resolved seq %d after the report, want the republished %d", r.Seq, now)
	}
}
