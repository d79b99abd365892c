package netlab

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
)

// mesh is the lab most scenarios use: on the internet, the founder (the mesh authority, a
// bootstrap node and a relay) and a second relay; two home networks, each behind its own NAT
// and both on 192.168.1.0/24, with alice in the first and bob in the second. Both joined with
// an invitation through their NAT; both bootstrap from the two public nodes.
type mesh struct {
	lab        *Lab
	founder    *labNode
	relay      *labNode
	home1      *Router
	home2      *Router
	alice, bob *labNode
	started    time.Time // when alice and bob were both launched
}

const (
	aliceID = "lab:home1:alice"
	bobID   = "lab:home2:bob"
)

// newMesh builds the mesh with the two homes' NATs and starts its four nodes.
func newMesh(t *testing.T, nat1, nat2 NAT) *mesh {
	t.Helper()
	m := &mesh{lab: newLab(t)}
	pub1, err := m.lab.Public("founder", "1.2.0.11")
	must(t, err)
	pub2, err := m.lab.Public("relay", "1.2.0.12")
	must(t, err)
	m.home1, err = m.lab.Home("home1", "1.2.0.101", nat1)
	must(t, err)
	m.home2, err = m.lab.Home("home2", "1.2.0.102", nat2)
	must(t, err)
	a, err := m.home1.Join("alice", "192.168.1.2")
	must(t, err)
	b, err := m.home2.Join("bob", "192.168.1.2")
	must(t, err)

	m.founder = found(t, pub1, "lab:pub:founder", publicArgs...)
	m.founder.start()
	m.relay = join(t, pub2, m.founder, "lab:pub:relay", publicArgs...)
	m.relay.start()
	boot := append(m.founder.bootArgs(), m.relay.bootArgs()...)
	m.alice = join(t, a, m.founder, aliceID, boot...)
	m.bob = join(t, b, m.founder, bobID, boot...)
	m.started = time.Now()
	startAll(m.alice, m.bob)
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range []*labNode{m.founder, m.relay, m.alice, m.bob} {
				peers, _ := n.cli("peers")
				t.Logf("--- %s:\n%s\n%s", n.name, peers, n.logs())
			}
			// What each home waits to send, and where it finds the other.
			for _, h := range [][2]*labNode{{m.alice, m.bob}, {m.bob, m.alice}} {
				outbox, _ := h[0].cli("outbox")
				rec, _ := h[0].cli("resolve", h[1].agent)
				t.Logf("--- %s's outbox:\n%s\n--- %s resolves %s:\n%s", h[0].name, outbox, h[0].name, h[1].name, rec)
			}
		}
	})
	return m
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// startAll launches the nodes together and waits for each.
func startAll(nodes ...*labNode) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(n.start)
	}
	wg.Wait()
}

// inboxMsg is one line of `iacp-node inbox -o json`: an IACP message.
type inboxMsg struct {
	Envelope struct {
		MessageID string `json:"message_id"`
	} `json:"envelope"`
}

// inbox takes (--ack) what waits in the node's inbox and returns the message ids.
func (n *labNode) inbox() []string {
	out, err := n.cli("inbox", "--ack", "-o", "json")
	if err != nil {
		n.t.Log(err)
		return nil
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m inboxMsg
		if line != "" && json.Unmarshal([]byte(line), &m) == nil {
			ids = append(ids, m.Envelope.MessageID)
		}
	}
	return ids
}

// send queues a durable event to agent to and returns its message id.
func (n *labNode) send(to string, i int) string {
	n.t.Helper()
	id, err := n.trySend(to, i)
	if err != nil {
		n.t.Fatal(err)
	}
	return id
}

// sendOnceKnown is send for the first message between two homes that started together: it
// waits (within) until n resolves to. A node that settled in the mesh before the other
// published its record finds no such agent, and refuses the message (AGENT_NOT_FOUND) rather
// than queue it for an agent it has no sign of.
func (n *labNode) sendOnceKnown(to string, i int, within time.Duration) string {
	n.t.Helper()
	testsupport.WaitFor(n.t, within, n.name+" to resolve "+to, func() bool {
		var rec struct{}
		return n.json(&rec, "resolve", to) == nil
	})
	return n.send(to, i)
}

func (n *labNode) trySend(to string, i int) (string, error) {
	var doc struct {
		MessageID string `json:"message_id"`
	}
	if err := n.json(&doc, "send", "--to", to, "--intent", "notify", "--ttl", "10m",
		"--payload", fmt.Sprintf(`{"event_type":"lab","n":%d}`, i)); err != nil || doc.MessageID == "" {
		return "", fmt.Errorf("send %d: %v", i, err)
	}
	return doc.MessageID, nil
}

// sendSpaced sends count events to agent to, numbered from first, one every gap without
// waiting for the previous one's first attempt (which a broken path holds for the node's frame
// timeout), and returns their ids once all were queued.
func (n *labNode) sendSpaced(to string, first, count int, gap time.Duration) []string {
	n.t.Helper()
	ids := make([]string, count)
	errs := make([]error, count)
	var wg sync.WaitGroup
	for i := range count {
		wg.Go(func() { ids[i], errs[i] = n.trySend(to, first+i) })
		time.Sleep(gap)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			n.t.Fatal(err)
		}
	}
	return ids
}

// receiver collects what arrives in a node's inbox, with when each message was first seen,
// and counts any delivered twice.
type receiver struct {
	mu   sync.Mutex
	seen map[string]time.Time
	dups int
	stop chan struct{}
	done chan struct{}
}

// receive polls n's inbox (taking what it finds) every 250 ms until stopped.
func receive(n *labNode) *receiver {
	r := &receiver{seen: map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			select {
			case <-r.stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			ids := n.inbox()
			now := time.Now()
			r.mu.Lock()
			for _, id := range ids {
				if _, ok := r.seen[id]; ok {
					r.dups++
				} else {
					r.seen[id] = now
				}
			}
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *receiver) close() {
	close(r.stop)
	<-r.done
}

// at reports when id arrived.
func (r *receiver) at(id string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.seen[id]
	return t, ok
}

// waitAll waits until every id arrived.
func (r *receiver) waitAll(t testing.TB, within time.Duration, ids []string) {
	t.Helper()
	testsupport.WaitFor(t, within, fmt.Sprintf("%d messages to arrive", len(ids)), func() bool {
		for _, id := range ids {
			if _, ok := r.at(id); !ok {
				return false
			}
		}
		return true
	})
}

// relayOf is the peer id of the relay n's connection to peer goes through ("" if none).
func (n *labNode) relayOf(peer string) string {
	for _, p := range n.peers().Peers {
		if p.PeerID != peer {
			continue
		}
		for _, a := range p.Addrs {
			if before, _, ok := strings.Cut(a, "/p2p-circuit"); ok {
				return before[strings.LastIndex(before, "/p2p/")+5:]
			}
		}
	}
	return ""
}
