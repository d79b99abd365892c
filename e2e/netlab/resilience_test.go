package netlab

import (
	"slices"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
)

// The relay that carries the only path between two homes is killed (their NATs are symmetric,
// so no hole can be punched): nothing is lost, nothing is delivered twice, and messages flow
// again through the other relay.
func TestNAT_RelayKilledMessagesFlowThroughAnother(t *testing.T) {
	t.Parallel()
	m := newMesh(t, Symmetric, Symmetric)
	alice, bob := m.alice, m.bob
	aliceP := alice.id()
	in := receive(alice)
	defer in.close()
	ids := []string{bob.sendOnceKnown(aliceID, 0, 60*time.Second)}
	in.waitAll(t, 30*time.Second, ids)
	var through string
	testsupport.WaitFor(t, 10*time.Second, "bob's relayed connection to alice", func() bool {
		through = bob.relayOf(aliceP)
		return through != ""
	})
	victim := m.relay
	if through == m.founder.id() {
		victim = m.founder
	}
	killed := time.Now()
	victim.kill()
	t.Logf("killed %s, the relay between bob and alice", victim.name)
	after := len(ids)
	ids = append(ids, bob.sendSpaced(aliceID, 1, 8, 250*time.Millisecond)...)
	in.waitAll(t, 60*time.Second, ids)
	resumed := time.Duration(1 << 62)
	for _, id := range ids[after:] {
		at, _ := in.at(id)
		resumed = min(resumed, at.Sub(killed))
	}
	record(t, "first delivery after the relay carrying the path was killed", resumed)
	if in.dups > 0 {
		t.Errorf("%d messages delivered twice", in.dups)
	}
	if now := bob.relayOf(aliceP); now == through || (now == "" && bob.pathTo(aliceP) == "") {
		t.Errorf("bob's path to alice after the kill: relay %q, path %q", now, bob.pathTo(aliceP))
	}
}

// partitionFor is how long a home is cut off: a minute in the full run, less in `make test`.
func partitionFor() time.Duration {
	if *full {
		return time.Minute
	}
	return 8 * time.Second
}

// A home network is cut off and comes back: what was sent to it meanwhile arrives once, and
// liveness goes from alive to suspect (silence) and back to alive after the heal.
func TestNAT_HomeCutOffAndBack(t *testing.T) {
	t.Parallel()
	m := newMesh(t, Cone, Cone)
	alice, bob := m.alice, m.bob
	in := receive(alice)
	defer in.close()
	ids := []string{bob.sendOnceKnown(aliceID, 0, 60*time.Second)}
	in.waitAll(t, 30*time.Second, ids)
	testsupport.WaitFor(t, 30*time.Second, "bob to see alice alive", func() bool { return bob.stateOf(aliceID) == "alive" })

	cut := time.Now()
	must(t, m.home1.Cut())
	ids = append(ids, bob.sendSpaced(aliceID, 1, 5, 200*time.Millisecond)...)
	testsupport.WaitFor(t, 30*time.Second, "bob to stop seeing alice alive", func() bool { return bob.stateOf(aliceID) != "alive" })
	record(t, "liveness leaves alive after the cut", time.Since(cut))
	time.Sleep(time.Until(cut.Add(partitionFor())))
	must(t, m.home1.Heal())
	healed := time.Now()
	t.Logf("home1 cut off for %v", healed.Sub(cut).Round(time.Second))

	testsupport.WaitFor(t, 60*time.Second, "bob to see alice alive again", func() bool { return bob.stateOf(aliceID) == "alive" })
	record(t, "liveness alive again after the heal (1 s heartbeats)", time.Since(healed))
	in.waitAll(t, 90*time.Second, ids)
	var last time.Time
	for _, id := range ids[1:] {
		at, _ := in.at(id)
		last = later(last, at)
	}
	record(t, "every message sent during the cut delivered, after the heal", last.Sub(healed))
	if in.dups > 0 {
		t.Errorf("%d messages delivered twice", in.dups)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// stateOf is agent's liveness as this node sees it ("" when it does not know it).
func (n *labNode) stateOf(agent string) string {
	var doc struct {
		Agents []struct {
			AgentID string `json:"agent_id"`
			State   string `json:"state"`
		} `json:"agents"`
	}
	if err := n.json(&doc, "agents"); err != nil {
		n.t.Log(err)
	}
	i := slices.IndexFunc(doc.Agents, func(a struct {
		AgentID string `json:"agent_id"`
		State   string `json:"state"`
	}) bool {
		return a.AgentID == agent
	})
	if i < 0 {
		return ""
	}
	return doc.Agents[i].State
}

// A laptop moves from one home network to another (a new private and a new public address):
// its peers find it again, and what they send reaches it.
func TestNAT_LaptopMovesToAnotherNetwork(t *testing.T) {
	t.Parallel()
	m := newMesh(t, Cone, Cone)
	home3, err := m.lab.Home("home3", "1.2.0.103", Cone)
	must(t, err)
	alice, bob := m.alice, m.bob
	in := receive(alice)
	defer in.close()
	ids := []string{bob.sendOnceKnown(aliceID, 0, 60*time.Second)}
	in.waitAll(t, 30*time.Second, ids)

	moved := time.Now()
	must(t, home3.Move(alice.host, "192.168.1.7"))
	ids = append(ids, bob.send(aliceID, 1))
	in.waitAll(t, 120*time.Second, ids)
	at, _ := in.at(ids[1])
	record(t, "a message reaches the laptop after it moved networks", at.Sub(moved))
	back := receive(bob)
	defer back.close()
	reply := alice.send(bobID, 2)
	back.waitAll(t, 60*time.Second, []string{reply})
	if in.dups > 0 {
		t.Errorf("%d messages delivered twice", in.dups)
	}
}
