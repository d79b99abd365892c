package node

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// A resolver's cached answer can go stale: the agent reserved a relay, or moved, after it was
// cached. A send that cannot reach the peer of that answer tells the resolver, which drops it,
// and resolves the agent once more: the message arrives on the first Send, not on a retry.
func TestSend_AStaleCachedAnswerIsResolvedAgain(t *testing.T) {
	carol, bob, r := staleAnswer(t, 5300, time.Now().Add(-time.Second))
	if err := carol.Send(testCtx(t), event(t, carol.Builder(), agentName(1))); err != nil {
		t.Fatalf("carol to bob, whose cached answer names a peer that is gone: %v", err)
	}
	if bob.Inbox().Len() != 1 {
		t.Fatalf("bob's inbox holds %d messages, want 1", bob.Inbox().Len())
	}
	if r.dropped != 1 {
		t.Fatalf("the resolver was told %d times that its answer was unreachable, want 1", r.dropped)
	}
}

// An answer the resolver looked up for the send itself is the mesh's latest: a send that cannot
// reach its peer does not look it up again, and the message waits in the outbox.
func TestSend_AFreshAnswerIsNotResolvedAgain(t *testing.T) {
	carol, bob, r := staleAnswer(t, 5310, time.Now().Add(time.Hour)) // found during the send
	if err := carol.Send(testCtx(t), event(t, carol.Builder(), agentName(1))); err != nil {
		t.Fatalf("carol's durable send: %v", err)
	}
	if r.dropped != 0 || bob.Inbox().Len() != 0 {
		t.Fatalf("the fresh answer was dropped %d times and bob holds %d messages; want it kept and the message queued", r.dropped, bob.Inbox().Len())
	}
}

// A cached answer can name addresses where nothing answers (the agent's home network, seen
// from another, drops every packet): the dial holds until the attempt's deadline, and the send
// has no time left to resolve again. The answer is dropped all the same, and the next attempt
// finds the agent where the mesh says it is.
func TestSend_AStaleAnswerWhoseDialHangsIsNotTriedTwice(t *testing.T) {
	startBob, _ := restartable(t, agentName(1))
	bob := startBob()
	t.Cleanup(func() { bob.Close() })
	mute, _ := peer.IDFromPrivateKey(testsupport.Key(t))
	r := &cachingResolver{
		cached:   map[string]peer.AddrInfo{agentName(1): {ID: mute, Addrs: []ma.Multiaddr{muteListener(t)}}},
		cachedAt: time.Now().Add(-time.Second),
		mesh:     map[string]peer.AddrInfo{agentName(1): {ID: bob.ID(), Addrs: bob.host.Addrs()}},
	}
	startCarol, _ := restartable(t, agentName(0))
	carol := startCarol(WithTimeouts(300*time.Millisecond, time.Minute), WithRetry(50*time.Millisecond, 200*time.Millisecond))
	t.Cleanup(func() { carol.Close() })
	carol.AddResolver(r)

	if err := carol.Send(testCtx(t), event(t, carol.Builder(), agentName(1))); err != nil {
		t.Fatalf("carol's durable send: %v", err)
	}
	testsupport.WaitFor(t, 10*time.Second, "the message in bob's inbox", func() bool { return bob.Inbox().Len() == 1 })
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dropped != 1 {
		t.Fatalf("the resolver was told %d times that its answer was unreachable, want 1", r.dropped)
	}
}

// muteListener accepts TCP connections on loopback and never answers: a libp2p dial to it holds
// until its deadline. It stops when the test ends.
func muteListener(t *testing.T) ma.Multiaddr {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	})
	return ma.StringCast(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", l.Addr().(*net.TCPAddr).Port))
}

// staleAnswer starts carol and bob on a mocknet whose ports start at port, and gives carol a
// caching resolver whose answer for bob's agent, found at cachedAt, names a peer that is gone;
// the mesh, asked again, names bob.
func staleAnswer(t *testing.T, port int, cachedAt time.Time) (carol, bob *Node, r *cachingResolver) {
	t.Helper()
	mn := testsupport.Mocknet(t, 2, testsupport.FirstPort(port))
	carol, err := startNode(t, mn.Hosts[0], mn.Keys[0], agentName(0))
	if err != nil {
		t.Fatal(err)
	}
	bob, err = startNode(t, mn.Hosts[1], mn.Keys[1], agentName(1), WithInbox(true))
	if err != nil {
		t.Fatal(err)
	}
	gone, _ := peer.IDFromPrivateKey(testsupport.Key(t))
	r = &cachingResolver{
		cached:   map[string]peer.AddrInfo{agentName(1): {ID: gone}},
		cachedAt: cachedAt,
		mesh:     map[string]peer.AddrInfo{agentName(1): {ID: bob.ID(), Addrs: bob.host.Addrs()}},
	}
	carol.AddResolver(r)
	return carol, bob, r
}

// cachingResolver answers from cached, found at cachedAt, until told that the peer it gave is
// unreachable by a resolve begun after that, and from mesh after.
type cachingResolver struct {
	mu       sync.Mutex
	cached   map[string]peer.AddrInfo // since cachedAt
	cachedAt time.Time
	mesh     map[string]peer.AddrInfo
	dropped  int
}

func (r *cachingResolver) ResolveAgent(_ context.Context, agentID string) (peer.AddrInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ai, ok := r.cached[agentID]; ok {
		return ai, nil
	}
	if ai, ok := r.mesh[agentID]; ok {
		return ai, nil
	}
	return peer.AddrInfo{}, protocol.Errorf(protocol.CodeAgentNotFound, "no record of %s", agentID)
}

func (r *cachingResolver) Unreachable(agentID string, p peer.ID, since time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ai, ok := r.cached[agentID]; !ok || ai.ID != p || !r.cachedAt.Before(since) {
		return false
	}
	delete(r.cached, agentID)
	r.dropped++
	return true
}
