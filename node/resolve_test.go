package node

import (
	"context"
	"sync"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// A resolver's cached answer can go stale: the agent reserved a relay, or moved, after it was
// cached. A send that cannot reach the peer of that answer tells the resolver, which drops it,
// and resolves the agent once more: the message arrives on the first Send, not on a retry.
func TestSend_AStaleCachedAnswerIsResolvedAgain(t *testing.T) {
	mn := testsupport.Mocknet(t, 2, testsupport.FirstPort(5300))
	carol, err := startNode(t, mn.Hosts[0], mn.Keys[0], agentName(0))
	if err != nil {
		t.Fatal(err)
	}
	bob, err := startNode(t, mn.Hosts[1], mn.Keys[1], agentName(1), WithInbox(true))
	if err != nil {
		t.Fatal(err)
	}
	gone, _ := peer.IDFromPrivateKey(testsupport.Key(t))
	r := &cachingResolver{
		cached: map[string]peer.AddrInfo{agentName(1): {ID: gone}},
		mesh:   map[string]peer.AddrInfo{agentName(1): {ID: bob.ID(), Addrs: bob.host.Addrs()}},
	}
	carol.AddResolver(r)
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

// cachingResolver answers from cached until told that the peer it gave is unreachable, and
// from mesh after.
type cachingResolver struct {
	mu      sync.Mutex
	cached  map[string]peer.AddrInfo
	mesh    map[string]peer.AddrInfo
	dropped int
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

func (r *cachingResolver) Unreachable(agentID string, p peer.ID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ai, ok := r.cached[agentID]; !ok || ai.ID != p {
		return false
	}
	delete(r.cached, agentID)
	r.dropped++
	return true
}
