package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/trust"
)

// A revoked agent is refused everywhere within one gossip round: the authority's node signs
// the next revocation list and broadcasts it; every node applies it at once (the periodic
// sync is a minute away, so gossip carried it), keeps it on disk, and from then on refuses
// the agent's messages with IDENTITY_INVALID naming the revocation, and its heartbeats.
func TestTrustAuthority_RevokedIsRefusedEverywhereWithinAGossipRound(t *testing.T) {
	m, _ := certifiedMeshWith(t, 4, []Option{WithGossip(true), WithHeartbeatInterval(time.Second)})
	auth, bob := m.nodes[0], m.nodes[2]
	for i, nd := range m.nodes {
		if i == 0 {
			continue
		}
		// the broadcast is taken from an author whose certificate the node verified: its
		// heartbeats bring it within a round
		testsupport.WaitFor(t, 15*time.Second, fmt.Sprintf("node %d holds the authority node's certificate", i), func() bool {
			_, err := nd.trust.Heard(agentName(0), auth.ID())
			return err == nil
		})
	}
	for _, i := range []int{1, 3} {
		if code, _ := dialRaw(t, bob, m.nodes[i]).refusal(event(t, bob.Builder(), agentName(i))); code != "" {
			t.Fatalf("before the revocation node %d refused bob: %s", i, code)
		}
		testsupport.WaitFor(t, 15*time.Second, fmt.Sprintf("node %d lists bob alive", i), func() bool {
			a, ok := m.nodes[i].Agent(agentName(2))
			return ok && a.State == StateAlive
		})
	}
	if _, err := m.nodes[1].Trust().Revoke(testCtx(t), agentName(2), RevokeOptions{}); protocol.CodeOf(err) != protocol.CodePermissionDenied {
		t.Fatalf("a node that is not the authority revoked: %v", err)
	}
	revoked, err := auth.Trust().Revoke(testCtx(t), agentName(2), RevokeOptions{})
	if err != nil || len(revoked) != 1 || revoked[0].Peer != bob.ID() {
		t.Fatalf("revoke: %+v %v", revoked, err)
	}
	for i, nd := range m.nodes {
		testsupport.WaitFor(t, 10*time.Second, fmt.Sprintf("node %d applied the revocation", i), func() bool { return nd.Trust().RevocationSeq() == auth.Trust().RevocationSeq() })
	}
	// bob leaves the liveness tables with the list, not after his silence (a beat validated
	// just before the list applied may put him back for a moment: the wait allows for it)
	for _, i := range []int{1, 3} {
		testsupport.WaitFor(t, 2*time.Second, fmt.Sprintf("node %d forgets bob", i), func() bool {
			_, ok := m.nodes[i].Agent(agentName(2))
			return !ok
		})
	}
	for _, i := range []int{0, 1, 3} {
		code, perr := dialRaw(t, bob, m.nodes[i]).refusal(event(t, bob.Builder(), agentName(i)))
		expectCode(t, code, protocol.CodeIdentityInvalid)
		if !strings.Contains(perr.Message, "revoked") {
			t.Fatalf("node %d's refusal does not name the revocation: %q", i, perr.Message)
		}
		if i != 0 {
			if _, err := m.nodes[i].trust.Heard(agentName(2), bob.ID()); err == nil {
				t.Fatalf("node %d still takes bob's heartbeats", i)
			}
		}
		saved, err := os.ReadFile(filepath.Join(m.nodes[i].cfg.DataDir, trust.RevocationsFile))
		list, _ := os.ReadFile(filepath.Join(auth.cfg.DataDir, trust.RevocationsFile))
		if err != nil || len(saved) == 0 || string(saved) != string(list) {
			t.Fatalf("node %d did not keep the list: %v", i, err)
		}
	}
	// the others are untouched
	if code, _ := dialRaw(t, m.nodes[3], m.nodes[1]).refusal(event(t, m.nodes[3].Builder(), agentName(1))); code != "" {
		t.Fatalf("an agent that was not revoked was refused: %s", code)
	}
}

// A node that missed the broadcast (here: no gossip at all) asks a connected peer for a newer
// list at each sync, and catches up.
func TestTrustAuthority_AMissedRevocationListIsFetchedFromAPeer(t *testing.T) {
	fastSync := func(c *Config) error { c.revocationSync = 50 * time.Millisecond; return nil }
	m, _ := certifiedMeshWith(t, 3, []Option{fastSync})
	if _, err := m.nodes[0].Trust().Revoke(testCtx(t), agentName(1), RevokeOptions{}); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 10*time.Second, "node 2 fetched the list", func() bool { return m.nodes[2].Trust().RevocationSeq() == 1 })
	code, perr := dialRaw(t, m.nodes[1], m.nodes[2]).refusal(event(t, m.nodes[1].Builder(), agentName(2)))
	expectCode(t, code, protocol.CodeIdentityInvalid)
	if !strings.Contains(perr.Message, "revoked") {
		t.Fatalf("refusal %q does not name the revocation", perr.Message)
	}
}
