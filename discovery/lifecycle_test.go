package discovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/iacp-node/iacp-node/internal/testsupport"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestBootstrapUnreachableThenJoins: a node whose only bootstrap peer is unreachable says so (log
// lines naming the peer and the error, Status) and keeps trying; once the peer is reachable it
// joins.
func TestBootstrapUnreachableThenJoins(t *testing.T) {
	m := newMesh(t, 0, 0)
	bh, bsk := m.mn.AddHost(t, hostPort)
	nh, nsk := m.mn.AddHost(t, hostPort+1) // not linked yet: dials fail
	boot, err := New(bh, bsk, WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	m.ds = append(m.ds, boot)
	var logs syncBuf
	bootInfo := peer.AddrInfo{ID: bh.ID(), Addrs: bh.Addrs()}
	d, err := New(nh, nsk, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), WithBootstrapPeers([]peer.AddrInfo{bootInfo}),
		WithBackoff(2*time.Millisecond, 10*time.Millisecond), WithConnectTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m.ds = append(m.ds, d)
	testsupport.WaitFor(t, 10*time.Second, "three failed rounds", func() bool { return d.Status().FailedRounds >= 3 })
	st := d.Status()
	if st.Bootstrapped || st.BootstrapAnswered != 0 || st.BootstrapConfigured != 1 ||
		!strings.Contains(st.LastError, bh.ID().String()) || st.BootstrapPeers[0].LastError == "" {
		t.Fatalf("status while unreachable: %+v", st)
	}
	out := logs.String()
	if !strings.Contains(out, "bootstrap_peer="+bh.ID().String()) || !strings.Contains(out, "no bootstrap peer answered") {
		t.Fatalf("logs do not name the peer and the failure:\n%s", out)
	}
	if _, err := m.mn.LinkPeers(bh.ID(), nh.ID()); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 10*time.Second, "joined after the peer came back", func() bool { return d.Status().Bootstrapped })
	if st := d.Status(); st.BootstrapAnswered != 1 || st.FailedRounds != 0 {
		t.Fatalf("status after joining: %+v", st)
	}
}

// A node joins through the first two bootstrap peers to answer: a slow one (here every byte
// to it takes 3 s, so its dial takes several times that, within the minute's connect timeout)
// does not hold the join back, and its dial goes on, to be recorded when it ends. (A longer
// latency would test the same, but mocknet's Close waits for what is in flight on the link.)
func TestJoinDoesNotWaitForASlowBootstrapPeer(t *testing.T) {
	m := newMesh(t, 2, 1) // two live bootstrap peers, the second joined to the first
	m.waitJoined(t)
	sh, _ := m.mn.AddHost(t, hostPort+2)
	nh, nsk := m.mn.AddHost(t, hostPort+3)
	if err := m.mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	for _, l := range m.mn.LinksBetweenPeers(nh.ID(), sh.ID()) {
		l.SetOptions(mocknet.LinkOptions{Latency: 3 * time.Second})
	}
	boot := []peer.AddrInfo{{ID: sh.ID(), Addrs: sh.Addrs()}}
	for _, h := range m.hosts {
		boot = append(boot, peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()})
	}
	d, err := New(nh, nsk, WithLogger(quiet), WithConnectTimeout(time.Minute), WithBootstrapPeers(boot))
	if err != nil {
		t.Fatal(err)
	}
	m.ds = append(m.ds, d)
	testsupport.WaitFor(t, 30*time.Second, "joined through the peers that answered", func() bool {
		s := d.Status()
		return s.Bootstrapped && s.RoutingTableSize > 0
	})
	st := d.Status()
	if st.BootstrapAnswered != 2 || st.FailedRounds != 0 {
		t.Errorf("status after joining: %+v", st)
	}
	if p := st.BootstrapPeers[0]; p.Answered || p.LastError != "" || p.LastTry.IsZero() {
		t.Errorf("the slow peer's dial should still be under way: %+v", p)
	}
}

// With two bootstrap peers or more, a node waits for two to answer before it joins, as
// kad-dht's own bootstrap does: a mesh that restarts at once and joins through one peer each
// could split. Here the second peer answers slowly (every byte takes 500 ms), and the node
// is joined only once it has. A peer listed twice (an address per transport, say) is one
// peer: its two dials are not two answers.
func TestJoinWaitsForTwoBootstrapPeers(t *testing.T) {
	for name, twice := range map[string]bool{"each listed once": false, "the first listed twice": true} {
		t.Run(name, func(t *testing.T) {
			m := newMesh(t, 2, 1)
			m.waitJoined(t)
			nh, nsk := m.mn.AddHost(t, hostPort+2)
			if err := m.mn.LinkAll(); err != nil {
				t.Fatal(err)
			}
			for _, l := range m.mn.LinksBetweenPeers(nh.ID(), m.hosts[1].ID()) {
				l.SetOptions(mocknet.LinkOptions{Latency: 500 * time.Millisecond})
			}
			var boot []peer.AddrInfo
			for _, h := range m.hosts {
				boot = append(boot, peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()})
			}
			if twice {
				boot = append([]peer.AddrInfo{boot[0]}, boot...)
			}
			d, err := New(nh, nsk, WithLogger(quiet), WithBootstrapPeers(boot))
			if err != nil {
				t.Fatal(err)
			}
			m.ds = append(m.ds, d)
			testsupport.WaitFor(t, 30*time.Second, "joined", func() bool { return d.Status().Bootstrapped })
			st := d.Status()
			if st.BootstrapConfigured != 2 || st.BootstrapAnswered != 2 || !st.BootstrapPeers[1].Answered {
				t.Fatalf("joined with %d of %d bootstrap peers answered, the slow one %+v; want both of 2",
					st.BootstrapAnswered, st.BootstrapConfigured, st.BootstrapPeers[len(st.BootstrapPeers)-1])
			}
		})
	}
}

func TestCloseTwiceAndAfterClose(t *testing.T) {
	m := newMesh(t, 1, 0)
	d := m.ds[0]
	if err := d.Leave(context.Background()); !errors.Is(err, ErrNotPublished) {
		t.Fatalf("Leave before anything was published: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := d.Resolve(context.Background(), agentID(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Resolve after Close: %v", err)
	}
	if err := d.Publish(context.Background(), manifestFor(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}
}

func TestNewRefuses(t *testing.T) {
	m := newMesh(t, 2, 0)
	if _, err := New(m.hosts[0], m.keys[1]); err == nil {
		t.Fatal("accepted another host's key")
	}
	for _, o := range []Option{WithProtocolPrefix("/ipfs"), WithProtocolPrefix("iacp"), WithRecordTTL(time.Second),
		WithCacheTTL(2 * time.Hour), WithQuorum(-1), WithBootstrapPeers([]peer.AddrInfo{{}})} {
		if _, err := New(m.hosts[0], m.keys[0], o); err == nil {
			t.Fatal("an invalid option was accepted")
		}
	}
	for _, c := range []struct {
		o    Option
		want string
	}{
		{WithMaxStoredRecords(99), "max stored records 99 must be at least 100"},
		{WithMaxStoredBytes(1 << 20), "max stored bytes 1048576 must be at least 1056768"},
		{WithMaxStoredPerPeer(2), "max stored per peer 2 must be between 3 and max stored records (100000)"},
		{WithMaxStoredPerPeer(DefaultMaxStoredRecords + 1), "max stored per peer 100001 must be between"},
	} {
		if _, err := New(m.hosts[0], m.keys[0], c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("err = %v, want one that says %q", err, c.want)
		}
	}
}

// A node that announces its agent before it has joined publishes nothing (a walk would find
// no peer); once the bootstrap peer answers, the record goes out without another call.
func TestAnnounceBeforeJoinPublishesAfterJoin(t *testing.T) {
	m := newMesh(t, 0, 0)
	bh, bsk := m.mn.AddHost(t, hostPort)
	nh, nsk := m.mn.AddHost(t, hostPort+1) // not linked yet
	boot, err := New(bh, bsk, WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	m.ds = append(m.ds, boot)
	d, err := New(nh, nsk, WithLogger(quiet), WithBootstrapPeers([]peer.AddrInfo{{ID: bh.ID(), Addrs: bh.Addrs()}}),
		WithBackoff(2*time.Millisecond, 10*time.Millisecond), WithConnectTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m.ds = append(m.ds, d)
	if err := d.Announce(manifestFor(1)); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 10*time.Second, "two failed rounds", func() bool { return d.Status().FailedRounds >= 2 })
	if st := d.Status(); !st.Published.IsZero() || st.AgentID != agentID(1) {
		t.Fatalf("before the join: %+v", st)
	}
	if _, err := m.mn.LinkPeers(bh.ID(), nh.ID()); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 10*time.Second, "the record published after the join", func() bool { return !d.Status().Published.IsZero() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec, err := boot.Resolve(ctx, agentID(1))
	if err != nil || rec.PeerID != nh.ID() {
		t.Fatalf("resolve from the bootstrap peer: %+v, %v", rec, err)
	}
	if err := d.Announce(manifestFor(2)); err == nil {
		t.Fatal("announcing a second agent on one node was accepted")
	}
}

// A record published while the node knew only a few peers is republished once the routing
// table has doubled, and only then. One published from a full bucket (the configured k) is
// republished when the table's depth grows, the common prefix of its k-th closest peer with
// the node's key: the mesh has about doubled. A table that merely fills is no reason.
func TestRecordPlacementGoesStaleAsTheMeshGrows(t *testing.T) {
	m := newMesh(t, 1, 0)
	d := m.ds[0]
	setLocal(d, &localAgent{manifest: manifestFor(0), published: time.Now(), placed: placement{size: 3, depth: -1}})
	if d.maybeStale(placement{size: 5, depth: -1}) || d.needsPublish() {
		t.Fatal("stale before the table doubled")
	}
	if !d.maybeStale(placement{size: 6, depth: -1}) || !d.needsPublish() {
		t.Fatal("not stale once the table doubled")
	}
	if d.maybeStale(placement{size: 12, depth: -1}) {
		t.Fatal("marked stale twice")
	}
	full := placement{size: DefaultBucketSize, depth: 2}
	setLocal(d, &localAgent{manifest: manifestFor(0), published: time.Now(), placed: full})
	if d.maybeStale(placement{size: 10 * DefaultBucketSize, depth: 2}) {
		t.Fatal("a record placed from a full bucket went stale as the table filled at the same depth")
	}
	if !d.maybeStale(placement{size: 2 * DefaultBucketSize, depth: 3}) {
		t.Fatal("a record placed from a full bucket did not go stale once the mesh doubled (depth 2 to 3)")
	}
	d.mu.Lock()
	stale, misplaced := d.local.stale, d.local.misplaced
	d.mu.Unlock()
	if stale || !misplaced {
		t.Fatalf("a record placed from a full bucket: stale %v, misplaced %v; want it moved, not all published again", stale, misplaced)
	}
	// A full bucket is the configured k, not kad-dht's default.
	small := newMesh(t, 1, 0, WithBucketSize(10)).ds[0]
	setLocal(small, &localAgent{manifest: manifestFor(0), published: time.Now(), placed: placement{size: 12, depth: 1}})
	if small.maybeStale(placement{size: 30, depth: 1}) {
		t.Fatal("a record placed from a full bucket of 10 went stale at the same depth")
	}
	setLocal(small, &localAgent{manifest: manifestFor(0), published: time.Now(), placed: placement{size: 9, depth: -1}})
	if !small.maybeStale(placement{size: 18, depth: 0}) {
		t.Fatal("a record placed from 9 peers, a bucket of 10, did not go stale as the table doubled")
	}
}

// setLocal replaces the record a running node publishes, under the lock its health loop takes.
// A record given no addresses carries the host's, so that a change of them (which marks the
// record stale) does not race what the test checks.
func setLocal(d *Discovery, l *localAgent) {
	if l.addrs == nil {
		l.addrs = publicAddrs(d.h.Addrs())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.local = l
}

// A joined node dials its bootstrap peers again only while its routing table is small: in a
// small mesh a lost bootstrap connection comes back at the next health check; in a mesh whose
// routing table holds rejoinBelow peers or more, the bootstrap peers are left alone (thousands
// of nodes re-dialling them every minute would swamp them).
func TestJoinedNodeRedialsBootstrapOnlyWhileRoutingTableIsSmall(t *testing.T) {
	const health = 20 * time.Millisecond
	for _, c := range []struct {
		nodes  int
		redial bool
	}{{3, true}, {rejoinBelow + 3, false}} {
		m := newMesh(t, c.nodes, 1, WithHealthInterval(health))
		m.waitJoined(t)
		last := m.ds[c.nodes-1]
		// The small mesh's table holds every peer; the large one's needs only rejoinBelow of
		// them (a whole table of 12 can take long on a loaded machine, and is not the point).
		want := min(c.nodes-1, rejoinBelow)
		// How the table fills is not the point either: the node meets every peer directly
		// (kad-dht adds a DHT server it connects to), rather than waiting for a refresh walk
		// that a loaded machine can leave short of the size for a minute.
		for _, h := range m.hosts[:c.nodes-1] {
			if err := m.hosts[c.nodes-1].Connect(context.Background(), peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()}); err != nil {
				t.Fatal(err)
			}
		}
		testsupport.WaitFor(t, 60*time.Second, "a routing table of the size under test", func() bool {
			return last.Status().RoutingTableSize >= want
		})
		// A round the health loop began while the table was still small may still be
		// counting: let it end before taking the count the assertion compares with.
		time.Sleep(5 * health)
		boot := m.hosts[0].ID()
		rounds := last.Status().Rounds
		if err := m.hosts[c.nodes-1].Network().ClosePeer(boot); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * health)
		redialled := last.Status().Rounds > rounds
		if redialled != c.redial {
			t.Errorf("%d nodes (routing table %d): bootstrap rounds after the join went from %d to %d; want more: %v",
				c.nodes, last.Status().RoutingTableSize, rounds, last.Status().Rounds, c.redial)
		}
		m.close()
	}
}

// The first node of a mesh has no bootstrap peer: it announces its record as soon as the
// first peer joins it, not a health interval (a minute) later, so that a two-node mesh
// started by hand finds both agents at once (README, "A mesh in five minutes").
func TestFoundingNodePublishesAsSoonAsSomeoneJoins(t *testing.T) {
	mn := testsupport.Mocknet(t, 2, testsupport.FirstPort(hostPort), testsupport.LinkOnly())
	founder, fk, joiner, jk := mn.Hosts[0], mn.Keys[0], mn.Hosts[1], mn.Keys[1]
	var ds []*Discovery
	for i, c := range []struct {
		h    host.Host
		k    crypto.PrivKey
		boot []peer.AddrInfo
	}{{founder, fk, nil}, {joiner, jk, []peer.AddrInfo{{ID: founder.ID(), Addrs: founder.Addrs()}}}} {
		d, err := New(c.h, c.k, WithLogger(quiet), WithQuorum(0), WithBootstrapPeers(c.boot))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		if err := d.Announce(manifestFor(i)); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	testsupport.WaitFor(t, 10*time.Second, "the founding node's record to be found by the node that joined it", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		rec, err := ds[1].Resolve(ctx, agentID(0))
		return err == nil && rec.PeerID == founder.ID()
	})
}

// The first node of a mesh keeps its record in its own DHT table while it is alone, so that
// the first lookup of the node that joins it finds it: "not found" from a settled node means
// the agent is not in the mesh, and the founding agent always is.
func TestFoundingNodesRecordIsThereForTheFirstLookupOfTheNodeThatJoinsIt(t *testing.T) {
	mn := testsupport.Mocknet(t, 2, testsupport.FirstPort(hostPort), testsupport.LinkOnly())
	founder, joiner := mn.Hosts[0], mn.Hosts[1]
	f, err := New(founder, mn.Keys[0], WithLogger(quiet), WithQuorum(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	if err := f.Announce(manifestFor(0)); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 10*time.Second, "the founder's record to be kept locally", func() bool {
		_, err := f.Resolve(context.Background(), agentID(0))
		return err == nil
	})
	j, err := New(joiner, mn.Keys[1], WithLogger(quiet), WithQuorum(0),
		WithBootstrapPeers([]peer.AddrInfo{{ID: founder.ID(), Addrs: founder.Addrs()}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	testsupport.WaitFor(t, 10*time.Second, "the joiner to settle", j.settled)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec, err := j.Resolve(ctx, agentID(0))
	if err != nil || rec.PeerID != founder.ID() {
		t.Fatalf("the joiner's first lookup of the founding agent: %v, %v; want its record", rec.PeerID, err)
	}
}

// The bootstrap list keeps one entry per peer, in the order of first mention, with every
// address the list gave it once, and never the node itself.
func TestBootstrapPeers_OneEntryPerPeer(t *testing.T) {
	self, a, b := peer.ID("self"), peer.ID("a"), peer.ID("b")
	tcp, quic := ma.StringCast("/ip4/127.0.0.1/tcp/4001"), ma.StringCast("/ip4/127.0.0.1/udp/4001/quic-v1")
	got := MergePeers([]peer.AddrInfo{
		{ID: b, Addrs: []ma.Multiaddr{tcp}},
		{ID: self, Addrs: []ma.Multiaddr{tcp}},
		{ID: a, Addrs: []ma.Multiaddr{quic}},
		{ID: b, Addrs: []ma.Multiaddr{quic, tcp}},
	}, self)
	want := []peer.AddrInfo{{ID: b, Addrs: []ma.Multiaddr{tcp, quic}}, {ID: a, Addrs: []ma.Multiaddr{quic}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("MergePeers: %v, want %v", got, want)
	}
}

// A capability lookup made before the node settled in the mesh (joined, and its routing table
// refreshed since) answers, but is not cached: walked through the few peers a node knows on
// joining, it may miss most providers, and it would answer every lookup for the cache TTL (a
// minute). Once the node has settled, an answer is cached as before.
func TestLookupsBeforeTheJoinRefreshAreNotCached(t *testing.T) {
	m := newMesh(t, 6, 1, WithHealthInterval(time.Hour)) // nothing settles the node behind the test's back
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.waitJoined(t)
	m.publish(t, ctx, 1, 2)
	d := m.ds[5]
	terminal := capability{KindTool, "terminal"} // manifestFor: every agent has it
	find := func(want int) {
		t.Helper()
		recs, err := d.FindByCapability(ctx, KindTool, "terminal")
		if err != nil || len(recs) != want {
			t.Fatalf("FindByCapability: %d records, %v; want %d", len(recs), err, want)
		}
	}
	d.setSettled(false) // as between its join and the end of the refresh that follows it
	find(2)
	if ps, ok := d.cache.providersOf(terminal); ok {
		t.Fatalf("a lookup made before the node settled cached %d providers", len(ps))
	}
	m.publish(t, ctx, 3)
	d.setSettled(true)
	find(3)
	if ps, ok := d.cache.providersOf(terminal); !ok || len(ps) != 3 {
		t.Fatalf("a settled node's lookup cached %d providers (%v), want 3", len(ps), ok)
	}
}
