package node

import (
	"bufio"
	"context"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// staller is a peer with no certificate whose certificate protocol takes a request and never
// answers: each request it is asked holds the asker until the asker's deadline.
type staller struct {
	h     host.Host
	sk    crypto.PrivKey
	asked atomic.Int32
}

// addStallers adds n stallers to m's network, linked to every node; they answer nothing until
// the test ends.
func addStallers(t *testing.T, m *mesh, n int) []*staller {
	t.Helper()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var out []*staller
	for i := range n {
		h, sk := m.mn.AddHost(t, 4200+i)
		s := &staller{h: h, sk: sk}
		h.SetStreamHandler(CertProtocolID, func(st network.Stream) {
			s.asked.Add(1)
			<-release
			st.Reset()
		})
		out = append(out, s)
	}
	if err := m.mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sendFrom sends one signed event from s, as agent, to n over a stream of its own, and leaves
// the stream open.
func (s *staller) sendFrom(t *testing.T, n *Node, agent string) network.Stream {
	t.Helper()
	b, err := protocol.NewBuilder(agent, s.sk, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.h.NewStream(testCtx(t), n.ID(), ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Reset() })
	raw, err := protocol.EncodeJSON(event(t, b, agentName(0)))
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.WriteFrame(st, raw); err != nil {
		t.Fatal(err)
	}
	return st
}

// fetching returns how many of ps the book is fetching certificates of right now.
func (b *certBook) fetching(ps ...peer.ID) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, p := range ps {
		if _, ok := b.inflight[p]; ok {
			n++
		}
	}
	return n
}

// Peers whose certificate protocol never answers do not hold the node's fetches: while more
// of them than the node once had fetch slots are each holding one, a certified peer's first
// message is taken at once; and a staller whose request ran into its deadline is not asked
// again for stallMemory: its next message is refused at once, with a code to retry after.
func TestStall_StallersHoldNeitherHonestMessagesNorTheNodeTwice(t *testing.T) {
	m, _ := certifiedMesh(t, 2)
	alice, bob := m.nodes[0], m.nodes[1]
	stallers := addStallers(t, m, 10)
	var ids []peer.ID
	for i, s := range stallers {
		s.sendFrom(t, alice, "test:stall:s"+string(rune('a'+i)))
		ids = append(ids, s.h.ID())
	}
	testsupport.WaitFor(t, 10*time.Second, "a fetch held by every staller", func() bool { return alice.certs.fetching(ids...) == len(ids) })

	code, _ := dialRaw(t, bob, alice).refusal(event(t, bob.Builder(), agentName(0)))
	expectCode(t, code, "")
	if n := alice.certs.fetching(ids...); n != len(ids) {
		t.Fatalf("bob's message was taken only after %d stallers' fetches ended; want it taken while all %d held theirs", len(ids)-n, len(ids))
	}

	testsupport.WaitFor(t, 2*certTimeout, "the stallers' fetches to end", func() bool { return alice.certs.fetching(ids...) == 0 })
	st := stallers[0]
	s := st.sendFrom(t, alice, "test:stall:again")
	c := &rawClient{t: t, s: s, br: bufio.NewReader(s)}
	reply, err := c.next()
	if err != nil {
		t.Fatalf("no answer to the staller's second message: %v", err)
	}
	if e, _ := protocol.ErrorOf(reply); e == nil || e.Code != protocol.CodeTimeout || !strings.Contains(e.Message, "in time") {
		t.Fatalf("the staller's second message: %+v; want TIMEOUT saying it did not answer in time", e)
	}
	if n := st.asked.Load(); n != 1 {
		t.Fatalf("the staller was asked %d times; want once until its stall is forgotten", n)
	}
}

// A relayer of messages by made-up authors, each needing a fetch of its own, holds at most
// certFetchesPerPeer of the node's fetches; the others are refused at once.
func TestStall_ARelayerHoldsAtMostItsBudgetOfFetches(t *testing.T) {
	m, _ := certifiedMesh(t, 1)
	alice := m.nodes[0]
	relayer := addStallers(t, m, 1)[0]
	if err := alice.host.Connect(testCtx(t), peer.AddrInfo{ID: relayer.h.ID(), Addrs: relayer.h.Addrs()}); err != nil {
		t.Fatal(err)
	}
	author := func() peer.ID {
		id, _ := peer.IDFromPrivateKey(testsupport.Key(t))
		return id
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, certFetchesPerPeer)
	for range certFetchesPerPeer {
		go func() {
			alice.certs.verify(ctx, "test:made:up", author(), relayer.h.ID())
			done <- struct{}{}
		}()
	}
	t.Cleanup(func() {
		cancel()
		for range certFetchesPerPeer {
			<-done
		}
	})
	testsupport.WaitFor(t, 10*time.Second, "the relayer's budget in use", func() bool { return relayer.asked.Load() == certFetchesPerPeer })
	for range 5 {
		err := alice.certs.verify(testCtx(t), "test:made:up", author(), relayer.h.ID())
		if protocol.CodeOf(err) != protocol.CodeTimeout || !strings.Contains(err.Error(), "under way already") {
			t.Fatalf("a fetch past the relayer's budget: %v; want TIMEOUT at once", err)
		}
	}
	if n := relayer.asked.Load(); n != certFetchesPerPeer {
		t.Fatalf("the relayer was asked %d times; want its budget, %d", n, certFetchesPerPeer)
	}
}

// The revocation sync asks certified peers (and the authority's node), not whoever is
// connected: a node surrounded by stallers still gets the list from the one certified peer
// that holds it, in one sync.
func TestStall_TheRevocationSyncAsksCertifiedPeers(t *testing.T) {
	m, _ := certifiedMesh(t, 3)
	auth, bob, carol := m.nodes[0], m.nodes[1], m.nodes[2]
	revoked, err := auth.Revoke(testCtx(t), agentName(1), RevokeOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	// carol verified bob's certificate, then the authority's node went out of her reach
	if err := bob.Send(testCtx(t), event(t, bob.Builder(), agentName(2))); err != nil {
		t.Fatal(err)
	}
	if err := m.mn.UnlinkPeers(auth.ID(), carol.ID()); err != nil {
		t.Fatal(err)
	}
	if err := m.mn.DisconnectPeers(auth.ID(), carol.ID()); err != nil {
		t.Fatal(err)
	}
	for _, s := range addStallers(t, m, 8) {
		if err := s.h.Connect(testCtx(t), peer.AddrInfo{ID: carol.ID(), Addrs: carol.host.Addrs()}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := auth.Revoke(testCtx(t), agentName(1), RevokeOptions{}); err != nil {
		t.Fatal(err)
	}
	ans, err := bob.certs.ask(testCtx(t), auth.ID(), auth.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := bob.certs.applyRevocations(ans.CRL); err != nil || bob.RevocationSeq() != 1 {
		t.Fatalf("bob took list %d: %v", bob.RevocationSeq(), err)
	}
	carol.syncRevocations(rand.New(rand.NewPCG(1, 2)))
	if !carol.certs.v.Revoked(revoked[0].ID) {
		t.Fatal("one sync among eight stallers and a certified peer did not bring the list")
	}
}

// Messages of one author whose certificate is being fetched wait for that fetch, at most
// certWaiters of them: more are refused at once, so that a staller's flood does not fill
// gossipsub's bounded validation while its fetch runs into the deadline.
func TestStall_AtMostCertWaitersWaitForOneFetch(t *testing.T) {
	m, _ := certifiedMesh(t, 1)
	alice := m.nodes[0]
	s := addStallers(t, m, 1)[0]
	if err := alice.host.Connect(testCtx(t), peer.AddrInfo{ID: s.h.ID(), Addrs: s.h.Addrs()}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	const callers = 1 + certWaiters
	done := make(chan struct{}, callers)
	for range callers {
		go func() {
			alice.certs.verify(ctx, "test:stall:author", s.h.ID(), "")
			done <- struct{}{}
		}()
	}
	t.Cleanup(func() {
		cancel()
		for range callers {
			<-done
		}
	})
	waiting := func() int {
		alice.certs.mu.Lock()
		defer alice.certs.mu.Unlock()
		if f, ok := alice.certs.inflight[s.h.ID()]; ok {
			return f.waiters
		}
		return 0
	}
	testsupport.WaitFor(t, 10*time.Second, "the fetch and its waiters", func() bool { return waiting() == certWaiters })
	err := alice.certs.verify(testCtx(t), "test:stall:author", s.h.ID(), "")
	if protocol.CodeOf(err) != protocol.CodeTimeout || !strings.Contains(err.Error(), "wait for its certificate already") {
		t.Fatalf("one more message of the author: %v; want TIMEOUT at once", err)
	}
	if n := s.asked.Load(); n != 1 {
		t.Fatalf("the author was asked %d times; want once", n)
	}
}
