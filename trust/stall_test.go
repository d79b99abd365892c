package trust

import (
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

// addStallers adds n stallers to the parts' network, linked and connected to every part; they
// answer nothing until the test ends.
func addStallers(t *testing.T, ps *parts, n int) []*staller {
	t.Helper()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var out []*staller
	for i := range n {
		h, sk := ps.net.AddHost(t, 5200+i)
		s := &staller{h: h, sk: sk}
		h.SetStreamHandler(CertProtocolID, func(st network.Stream) {
			s.asked.Add(1)
			<-release
			st.Reset()
		})
		out = append(out, s)
	}
	if err := ps.net.LinkAll(); err != nil {
		t.Fatal(err)
	}
	for _, s := range out {
		for _, h := range ps.net.Hosts {
			if err := s.h.Connect(testCtx(t), peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
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
// of them than the node once had fetch slots each hold one (their messages' claims wait on
// their certificates), a certified peer's first claim is judged at once; and a staller whose
// request ran into its deadline is not asked again for stallMemory: its next claim is refused
// at once, with a code to retry after.
func TestStall_StallersHoldNeitherHonestMessagesNorTheNodeTwice(t *testing.T) {
	ps := certifiedParts(t, 2)
	alice := ps.t[0]
	stallers := addStallers(t, ps, 10)
	var ids []peer.ID
	done := make(chan error, len(stallers))
	for i, s := range stallers {
		ids = append(ids, s.h.ID())
		go func() {
			done <- alice.Claim(context.Background(), "test:stall:s"+string(rune('a'+i)), s.h.ID(), SourceMessage)
		}()
	}
	testsupport.WaitFor(t, 10*time.Second, "a fetch held by every staller", func() bool { return alice.certs.fetching(ids...) == len(ids) })

	if err := alice.Claim(testCtx(t), agentName(1), ps.id(1), SourceMessage); err != nil {
		t.Fatalf("bob's claim among stallers: %v", err)
	}
	if n := alice.certs.fetching(ids...); n != len(ids) {
		t.Fatalf("bob's claim was judged only after %d stallers' fetches ended; want it judged while all %d held theirs", len(ids)-n, len(ids))
	}
	for range stallers {
		if err := <-done; protocol.CodeOf(err) != protocol.CodeTimeout {
			t.Fatalf("a staller's claim: %v; want TIMEOUT once its fetch ran into the deadline", err)
		}
	}
	st := stallers[0]
	err := alice.Claim(testCtx(t), "test:stall:again", st.h.ID(), SourceMessage)
	if protocol.CodeOf(err) != protocol.CodeTimeout || !strings.Contains(err.Error(), "in time") {
		t.Fatalf("the staller's second claim: %v; want TIMEOUT saying it did not answer in time", err)
	}
	if n := st.asked.Load(); n != 1 {
		t.Fatalf("the staller was asked %d times; want once until its stall is forgotten", n)
	}
}

// A relayer of messages by made-up authors, each needing a fetch of its own, holds at most
// certFetchesPerPeer of the node's fetches; the others are refused at once.
func TestStall_ARelayerHoldsAtMostItsBudgetOfFetches(t *testing.T) {
	ps := certifiedParts(t, 1)
	alice := ps.t[0]
	relayer := addStallers(t, ps, 1)[0]
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
	ps := certifiedParts(t, 3)
	auth, bob, carol := ps.t[0], ps.t[1], ps.t[2]
	revoked, err := auth.Revoke(testCtx(t), agentName(1), RevokeOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	// carol verified bob's certificate, then the authority's node went out of her reach
	if err := carol.Claim(testCtx(t), agentName(1), ps.id(1), SourceMessage); err != nil {
		t.Fatal(err)
	}
	if err := ps.net.UnlinkPeers(ps.id(0), ps.id(2)); err != nil {
		t.Fatal(err)
	}
	if err := ps.net.DisconnectPeers(ps.id(0), ps.id(2)); err != nil {
		t.Fatal(err)
	}
	addStallers(t, ps, 8)
	if _, err := auth.Revoke(testCtx(t), agentName(1), RevokeOptions{}); err != nil {
		t.Fatal(err)
	}
	ans, err := bob.certs.ask(testCtx(t), ps.id(0), ps.id(0))
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
	ps := certifiedParts(t, 1)
	alice := ps.t[0]
	s := addStallers(t, ps, 1)[0]
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
	// The staller's handler counts the ask on its own goroutine, after alice's fetch began.
	testsupport.WaitFor(t, 10*time.Second, "the fetch, its waiters and the author asked", func() bool {
		return waiting() == certWaiters && s.asked.Load() == 1
	})
	err := alice.certs.verify(testCtx(t), "test:stall:author", s.h.ID(), "")
	if protocol.CodeOf(err) != protocol.CodeTimeout || !strings.Contains(err.Error(), "wait for its certificate already") {
		t.Fatalf("one more message of the author: %v; want TIMEOUT at once", err)
	}
	if n := s.asked.Load(); n != 1 {
		t.Fatalf("the author was asked %d times; want once", n)
	}
}
