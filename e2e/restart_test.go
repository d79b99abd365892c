package e2e

import (
	"encoding/json"
	"testing"
	"time"
)

// restartBeat is the heartbeat interval of the restart test: the bound it asserts.
const restartBeat = 10 * time.Second

// Two nodes, A and B. B stops with SIGTERM and starts again within 2 s on the same data
// directory. A saw B as offline for over 90 s while the two were connected, and a message A
// queued for B arrived after about 94 s: B's peers relayed its last beats back to it, and its
// gossipsub graylisted them for "self originated" messages. Now B is alive at A, and has what
// A queued for it, within one heartbeat interval of its restart, in both trust modes (an
// authority's certified mesh, and an open one).
func TestRestart_SeenAliveAndGetsQueuedMessageWithinOneInterval(t *testing.T) {
	t.Run("authority", func(t *testing.T) {
		a := newProc(t, "a", "e2e:lab:alice")
		restartWithin(t, a, func() *proc { return joinProc(t, "b", "e2e:lab:bob", a) })
	})
	t.Run("open", func(t *testing.T) {
		a := newProc(t, "a", "e2e:lab:alice", "--open")
		restartWithin(t, a, func() *proc { return newProc(t, "b", "e2e:lab:bob", "--open") }, true)
	})
	// In open mode a peer that never spoke to A is bound to nothing at A: A knows B only
	// from the DHT, which says B left. A's retry, when B's beats come back, resolves B again.
	t.Run("open, never spoke", func(t *testing.T) {
		a := newProc(t, "a", "e2e:lab:alice", "--open")
		restartWithin(t, a, func() *proc { return newProc(t, "b", "e2e:lab:bob", "--open") }, false)
	})
}

// restartWithin runs the restart test with founder a and b as newB makes it; spoke has A and
// B exchange a message first.
func restartWithin(t *testing.T, a *proc, newB func() *proc, spoke ...bool) {
	a.beat = restartBeat.String()
	a.start()
	b := newB()
	b.beat, b.boot = restartBeat.String(), a.peerAddr()
	b.start()
	waitAgentState(t, a, "e2e:lab:bob", "alive", 30*time.Second)
	if len(spoke) == 0 || spoke[0] {
		// A and B have spoken: B's receipt binds B to its peer at A (gossip refreshes a
		// binding, never makes one).
		first, err := a.send("e2e:lab:bob", 600, 1)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		takeUntil(b, 10*time.Second, got, func() bool { return got[first] > 0 })
	}
	b.stop()
	waitAgentState(t, a, "e2e:lab:bob", "offline", 10*time.Second)
	id, err := a.send("e2e:lab:bob", 600, 1)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // restarted within 2 s of the stop
	restarted := time.Now()
	b.start()
	waitAgentState(t, a, "e2e:lab:bob", "alive", restartBeat-time.Since(restarted))
	seen := time.Since(restarted)
	taken := map[string]int{}
	takeUntil(b, restartBeat-time.Since(restarted), taken, func() bool { return taken[id] > 0 })
	if taken[id] != 1 {
		t.Fatalf("the message queued while B was down did not arrive within %s of the restart", restartBeat)
	}
	t.Logf("B alive at A %.1f s after its restart began; the queued message arrived by %.1f s", seen.Seconds(), time.Since(restarted).Seconds())
}

// waitAgentState waits until p's liveness table shows agent in state, or fails after d.
func waitAgentState(t *testing.T, p *proc, agent, state string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	last := "unknown"
	for {
		if _, body, err := p.do("GET", "/v1/agents", nil); err == nil {
			var r struct {
				Agents []struct {
					AgentID string `json:"agent_id"`
					State   string `json:"state"`
				} `json:"agents"`
			}
			_ = json.Unmarshal(body, &r)
			for _, ag := range r.Agents {
				if ag.AgentID == agent {
					last = ag.State
				}
			}
			if last == state {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never saw %s %s within %s (last: %s)", p.name, agent, state, d.Round(time.Millisecond), last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
