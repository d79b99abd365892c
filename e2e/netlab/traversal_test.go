package netlab

import (
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
)

// Two agents behind two different cone NATs, both joined by invitation through their NAT:
// the first message goes through a relay, then hole punching gives them a direct connection,
// over which requests, durable messages and broadcasts flow both ways. Neither home node
// advertises a loopback or private address, both hold relay reservations, and both run their
// DHT as a client.
func TestNAT_TwoHomesReachEachOtherThroughARelayThenDirectly(t *testing.T) {
	t.Parallel()
	m := newMesh(t, Cone, Cone)
	alice, bob := m.alice, m.bob
	aliceP, bobP := alice.id(), bob.id()

	in := receive(alice)
	defer in.close()
	first := bob.sendOnceKnown(aliceID, 0, 30*time.Second)
	in.waitAll(t, 30*time.Second, []string{first})
	at, _ := in.at(first)
	record(t, "first message through the relay, from both nodes' start", at.Sub(m.started))

	testsupport.WaitFor(t, 45*time.Second, "a hole-punched connection between alice and bob", func() bool {
		return bob.pathTo(aliceP) == "hole-punched" || alice.pathTo(bobP) == "hole-punched"
	})
	record(t, "direct connection after hole punching, from both nodes' start", time.Since(m.started))

	// Durable messages both ways, over the direct connection.
	ids := []string{bob.send(aliceID, 1), bob.send(aliceID, 2)}
	in.waitAll(t, 30*time.Second, ids)
	back := receive(bob)
	defer back.close()
	reply := alice.send(bobID, 3)
	back.waitAll(t, 30*time.Second, []string{reply})

	// A request, answered by bob's node (health), and a broadcast heard across both NATs.
	if out, err := alice.cli("request", "--to", bobID, "--intent", "health", "--wait", "20s"); err != nil {
		t.Fatalf("request through the NATs: %v\n%s", err, out)
	}
	tail, err := bob.host.Start(binary, "tail", "--data-dir", bob.dir, "--kinds", "event", "-o", "json")
	must(t, err)
	defer tail.Kill()
	testsupport.WaitFor(t, 30*time.Second, "alice's broadcast at bob", func() bool {
		if _, err := alice.cli("broadcast", "--event", "lab.hello", "--detail", "across two NATs"); err != nil {
			t.Log(err)
		}
		time.Sleep(300 * time.Millisecond)
		return strings.Contains(tail.Output(), "lab.hello")
	})

	for _, n := range []*labNode{alice, bob} {
		d := n.peers()
		if len(d.NAT.Relays) == 0 {
			t.Errorf("%s holds no relay reservation: %+v", n.name, d.NAT)
		}
		for _, a := range d.NAT.Advertised {
			if strings.HasPrefix(a, "/ip4/127.") || strings.HasPrefix(a, "/ip4/192.168.") {
				t.Errorf("%s advertises %s to peers outside its network", n.name, a)
			}
		}
		if mode := n.dhtMode(); mode != "client" {
			t.Errorf("%s runs its DHT as a %s behind its NAT", n.name, mode)
		}
	}
	if rec := bob.resolveAddrs(aliceID); len(rec) == 0 || strings.Contains(strings.Join(rec, " "), "192.168.") {
		t.Errorf("alice's agent record carries %v, want relay or public addresses only", rec)
	}
	if d := m.founder.peers(); d.NAT.Reachability != "public" {
		t.Errorf("the founder's reachability is %q, want public", d.NAT.Reachability)
	}
	if in.dups > 0 || back.dups > 0 {
		t.Errorf("duplicates delivered: %d at alice, %d at bob", in.dups, back.dups)
	}
}

// dhtMode is the node's DHT mode as `iacp-node status` reports it.
func (n *labNode) dhtMode() string {
	var doc struct {
		Discovery struct {
			Mode string `json:"mode"`
		} `json:"discovery"`
	}
	if err := n.json(&doc, "status"); err != nil {
		n.t.Log(err)
	}
	return doc.Discovery.Mode
}

// resolveAddrs is the addresses of agent's record as this node resolves it.
func (n *labNode) resolveAddrs(agent string) []string {
	var doc struct {
		Addrs []string `json:"addrs"`
	}
	if err := n.json(&doc, "resolve", agent); err != nil {
		n.t.Log(err)
	}
	return doc.Addrs
}

// record logs a measurement, and keeps it for the report of `make netlab`.
func record(t testing.TB, what string, d time.Duration) {
	t.Logf("measured: %s: %v", what, d.Round(10*time.Millisecond))
	measuresMu.Lock()
	defer measuresMu.Unlock()
	measures = append(measures, measure{Test: t.Name(), What: what, Value: d.Round(10 * time.Millisecond).String()})
}
