package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/delivery"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// The queue budget: a frame joins a queue when it fits under the bound, or when the queue is
// empty (so that a frame larger than the bound is served alone rather than never), per
// stream, per peer and in all; released bytes wake whoever waits.
func TestQueueBudget_BoundsPerStreamPerPeerAndInAll(t *testing.T) {
	b := newQueueBudget(100, 150, 200)
	ctx := context.Background()
	p, q := peer.ID("p"), peer.ID("q")
	var s1, s2, s3 int64
	mustAcquire := func(pr peer.ID, st *int64, n int64) {
		t.Helper()
		if err := b.acquire(ctx, pr, st, n); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(pr peer.ID, st *int64, n int64) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		if err := b.acquire(ctx, pr, st, n); err == nil {
			t.Fatalf("%d bytes for %s were queued past a bound", n, pr)
		}
	}
	mustAcquire(p, &s1, 500) // larger than every bound, but alone: served alone
	refused(p, &s1, 1)       // nothing joins it on its stream
	refused(p, &s2, 1)       // nor on another stream of the same peer
	refused(q, &s3, 1)       // nor anywhere: the total is spent
	b.release(p, &s1, 500)
	mustAcquire(p, &s1, 100)
	refused(p, &s1, 1)      // the stream's 100 are used
	mustAcquire(p, &s2, 50) // the peer's 150 are used
	refused(p, &s2, 1)
	mustAcquire(q, &s3, 50) // the total's 200 are used
	refused(q, &s3, 1)
	done := make(chan error, 1)
	go func() { done <- b.acquire(ctx, q, &s3, 10) }()
	b.release(p, &s1, 100)
	if err := <-done; err != nil {
		t.Fatalf("a release did not wake the waiting reader: %v", err)
	}
	if st := b.stats(); st.Bytes != 110 || st.PeakBytes != 500 || st.PeakPeerBytes != 500 {
		t.Fatalf("stats %+v", st)
	}
}

// Issue 13: 24 frames of almost 16 MiB with bad signatures took a node from 30 MB to 434 MB.
// Now frames are charged to their peer before their body is read: with budgets smaller than
// a frame, large frames are queued, and served, one at a time.
func TestInbound_LargeFramesAreQueuedOneAtATime(t *testing.T) {
	const frameSize = 256 << 10
	m := newMesh(t, 2, nil, func(i int, _ *mesh) []Option {
		return []Option{func(c *Config) error {
			c.MaxMessageBytes, c.QueueStreamBytes, c.QueuePeerBytes, c.QueueTotalBytes = 1<<20, 64<<10, 64<<10, 64<<10
			c.InboxSenderBytes = 1 << 20
			return nil
		}}
	})
	junk := event(t, m.nodes[0].Builder(), agentName(1))
	junk.Message.Payload = json.RawMessage(`{"event_type":"x","pad":"` + strings.Repeat("a", frameSize) + `"}`)
	var wg sync.WaitGroup
	for s := 0; s < 4; s++ {
		c := dialRaw(t, m.nodes[0], m.nodes[1])
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 6; i++ {
				bad := junk.Clone()
				bad.Envelope.MessageID = uuid.Must(uuid.NewV7()).String()
				raw, _ := protocol.EncodeJSON(bad) // the signature no longer matches the id
				if protocol.WriteFrame(c.s, raw) != nil {
					return
				}
				if _, err := c.next(); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	st := m.nodes[1].budget.stats()
	if st.PeakPeerBytes == 0 || st.PeakPeerBytes > frameSize+4096 {
		t.Fatalf("at most one frame (%d bytes) of the peer should ever be queued; the peak was %d", frameSize, st.PeakPeerBytes)
	}
	// The answer to the last frame goes out before its bytes are released.
	testsupport.WaitFor(t, 5*time.Second, "every frame's bytes to be released", func() bool { return m.nodes[1].budget.stats().Bytes == 0 })
}

// Issue 13: a peer over its rate is answered once and then has its stream ended, not a
// signed error per frame; until its bucket refills, nothing it starts is read.
func TestRate_OverRateIsAnsweredOnceThenTheStreamEnds(t *testing.T) {
	m := newMesh(t, 2, []Option{WithRateLimit(0.2, 2)}, nil)
	c := dialRaw(t, m.nodes[0], m.nodes[1])
	for i := 0; i < 2; i++ {
		c.send(event(t, m.nodes[0].Builder(), agentName(1)))
		if r, err := c.next(); err != nil || r.Message.Type != protocol.TypeResponse {
			t.Fatalf("message %d within the burst: %v %v", i, r, err)
		}
	}
	code, e := c.refusal(event(t, m.nodes[0].Builder(), agentName(1)))
	expectCode(t, code, protocol.CodeRateLimited)
	if e.RetryAfter <= 0 {
		t.Fatal("RATE_LIMITED without retry_after")
	}
	_ = protocol.WriteFrame(c.s, mustEncode(t, event(t, m.nodes[0].Builder(), agentName(1))))
	if r, err := c.next(); err == nil {
		t.Fatalf("the stream went on after the answer: %v", r.Message.Type)
	}
	// A new stream during the penalty is ended unread, without a second signed answer.
	c2 := dialRaw(t, m.nodes[0], m.nodes[1])
	c2.send(event(t, m.nodes[0].Builder(), agentName(1)))
	if r, err := c2.next(); err == nil {
		t.Fatalf("a penalised peer was answered again: %s", r.Message.Type)
	}
}

func mustEncode(t *testing.T, m *protocol.Message) []byte {
	t.Helper()
	b, err := protocol.EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The message rate counts what a peer sends on its own: replies to the node's own requests
// are not charged, so that a node that asks much is not cut off by the answers.
func TestRate_RepliesTheNodeWaitsForAreNotCharged(t *testing.T) {
	m := newMesh(t, 2, nil, func(i int, _ *mesh) []Option {
		if i == 0 {
			return []Option{WithRateLimit(0.1, 1)} // the requester accepts one unsolicited message per 10 s
		}
		return nil
	})
	m.nodes[1].Handle(protocol.IntentHandoff, func(ctx context.Context, r *Request) error {
		if strings.Contains(string(r.Msg.Message.Payload), "slow") {
			time.Sleep(60 * time.Millisecond) // past the receipt window: the answer comes out of band
		}
		return r.Reply(protocol.ResponseAccepted, map[string]any{"ok": true})
	})
	for i := 0; i < 10; i++ {
		task := "fast"
		if i%2 == 1 {
			task = "slow"
		}
		req, _ := m.nodes[0].Builder().Request(agentName(1), protocol.IntentHandoff, map[string]any{"task": task})
		if _, err := m.nodes[0].Request(testCtx(t), req); err != nil {
			t.Fatalf("request %d (%s): %v", i, task, err)
		}
	}
}

// Issue 13: 300 messages refused with AGENT_NOT_FOUND left 302 pins in trust.json. A message
// that fails any check binds nothing: no pin, no directory entry, no write of trust.json.
func TestTrust_RefusedMessagesPinNothing(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	c := dialRaw(t, m.nodes[0], m.nodes[1])
	for i := 0; i < 30; i++ {
		b, _ := protocol.NewBuilder("test:mesh:claimed-"+string(rune('a'+i%26))+string(rune('a'+i/26)), m.keys[0], nil)
		code, _ := c.refusal(event(t, b, "test:mesh:someone-else"))
		expectCode(t, code, protocol.CodeAgentNotFound)
	}
	n := m.nodes[1]
	if got := n.trust.len(); got != 0 {
		t.Fatalf("%d pins taken from refused messages", got)
	}
	if _, ok := n.directory.Peek("test:mesh:claimed-aa"); ok {
		t.Fatal("a refused message taught the directory where its claimed agent lives")
	}
	if err := n.trust.flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(n.Config().DataDir, "trust.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("trust.json was written without a pin to save (%v)", err)
	}
	// An accepted message pins its sender.
	c.send(event(t, m.nodes[0].Builder(), agentName(1)))
	if _, err := c.next(); err != nil {
		t.Fatal(err)
	}
	if p, ok := n.trust.peerOf(agentName(0)); !ok || p != m.nodes[0].ID() {
		t.Fatal("an accepted message did not pin its sender")
	}
}

// The pins and the directory are bounded: beyond max_pins and max_agents the entry used least
// recently is forgotten.
func TestTrust_PinsAndDirectoryAreBounded(t *testing.T) {
	m := newMesh(t, 2, nil, func(i int, _ *mesh) []Option {
		return []Option{func(c *Config) error { c.MaxPins, c.MaxAgents = 16, 16; return nil }}
	})
	n := m.nodes[1]
	c := dialRaw(t, m.nodes[0], m.nodes[1])
	for i := 0; i < 40; i++ {
		b, _ := protocol.NewBuilder("test:mesh:a"+strings.Repeat("x", i%8)+string(rune('a'+i/8)), m.keys[0], nil)
		c.send(event(t, b, agentName(1)))
		if r, err := c.next(); err != nil || r.Message.Type != protocol.TypeResponse {
			t.Fatalf("message %d: %v %v", i, r, err)
		}
	}
	if got := n.trust.len(); got > 16 {
		t.Fatalf("%d pins held; the bound is 16", got)
	}
	if got := n.directory.Len(); got > 16 {
		t.Fatalf("the directory holds %d agents; the bound is 16", got)
	}
}

// Issue 13: a single peer filled the shared inbox and every other sender got RATE_LIMITED.
// Each sending peer has its own share.
func TestInbox_EachSendingPeerHasItsOwnShare(t *testing.T) {
	m := newMesh(t, 3, []Option{WithDurable(false)}, func(i int, _ *mesh) []Option {
		if i != 1 {
			return nil
		}
		return []Option{WithInbox(true), func(c *Config) error { c.MaxMessageBytes, c.InboxSenderBytes = 4096, 8192; return nil }}
	})
	ctx := testCtx(t)
	var refused error
	for i := 0; i < 20 && refused == nil; i++ {
		refused = m.nodes[0].Send(ctx, event(t, m.nodes[0].Builder(), agentName(1)))
	}
	if protocol.CodeOf(refused) != protocol.CodeRateLimited || !strings.Contains(refused.Error(), "share") {
		t.Fatalf("the flooding peer was not refused for its share: %v", refused)
	}
	if err := m.nodes[2].Send(ctx, event(t, m.nodes[2].Builder(), agentName(1))); err != nil {
		t.Fatalf("another peer was refused because the first filled the inbox: %v", err)
	}
}

// Only replies travel on a session the node opened: a peer that writes anything else back on
// it has the session ended, and what it wrote never reaches the agent.
func TestSession_OnlyRepliesTravelOnIt(t *testing.T) {
	m := newMesh(t, 1, []Option{WithInbox(true)}, nil)
	n := m.nodes[0]
	h, sk := m.mn.AddHost(t, 4999)
	evil, _ := protocol.NewBuilder("test:mesh:evil", sk, nil)
	h.SetStreamHandler(ProtocolID, func(s network.Stream) {
		defer s.Close()
		if _, err := protocol.ReadFrame(s, 0); err != nil {
			return
		}
		req, _ := evil.Request(agentName(0), protocol.IntentHandoff, map[string]any{"task": "sneaked in"})
		raw, _ := protocol.EncodeJSON(req)
		_ = protocol.WriteFrame(s, raw)
		_, _ = io.Copy(io.Discard, s)
	})
	if err := m.mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	n.AddPeer("test:mesh:evil", peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()})
	ctx, cancel := context.WithTimeout(testCtx(t), 2*time.Second)
	defer cancel()
	_ = n.Send(ctx, event(t, n.Builder(), "test:mesh:evil")) // no receipt ever comes: it waits 2 s
	if n.Inbox().Len() != 0 {
		t.Fatal("a request written on the node's own session reached the agent")
	}
}

// readAudit returns every entry of a node's audit log.
func readAudit(t *testing.T, n *Node) []audit.Entry {
	t.Helper()
	var out []audit.Entry
	err := audit.Tail(context.Background(), filepath.Join(n.Config().DataDir, "audit"), 0, false, func(e audit.Entry) error {
		out = append(out, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Issue 13: every refusal was audited with its full payload, so unsigned 1 MB frames grew the
// audit directory by 21 MB in seconds. Refused input is audited as peer, size, hash and code,
// and each peer may add only so many refusal entries; the rest are counted in the next one.
func TestAudit_RefusalsCarryNoPayloadAndAreRateLimitedPerPeer(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	c := dialRaw(t, m.nodes[0], m.nodes[1])
	const refused = 3 * refusalAuditBurst
	for i := 0; i < refused; i++ {
		ev := event(t, m.nodes[0].Builder(), agentName(1))
		ev.Message.Payload = json.RawMessage(`{"event_type":"x","secret":"` + strings.Repeat("s", 4096) + `"}`) // breaks the signature
		code, _ := c.refusal(ev)
		expectCode(t, code, protocol.CodeIdentityInvalid)
	}
	var entries []audit.Entry
	for _, e := range readAudit(t, m.nodes[1]) {
		if e.Event == audit.EventRefused {
			entries = append(entries, e)
		}
	}
	if len(entries) == 0 || len(entries) > refusalAuditBurst+1 {
		t.Fatalf("%d refusal entries for %d refusals in an instant; at most %d may be written", len(entries), refused, refusalAuditBurst+1)
	}
	info, _ := protocol.Lookup(protocol.CodeIdentityInvalid)
	for _, e := range entries {
		if len(e.Payload) != 0 || e.Peer != m.nodes[0].ID().String() || e.Size == 0 || len(e.SHA256) != 64 || e.From != "" {
			t.Fatalf("refusal entry %+v: want no payload nor document field, the peer, the size and the hash", e)
		}
		if e.Reason != info.Description { // an error's own text can quote the document
			t.Fatalf("refusal reason %q: want the code's description %q", e.Reason, info.Description)
		}
	}
	// The next refusal after the budget refills carries the count of those not written.
	m.nodes[1].audits.mu.Lock()
	m.nodes[1].audits.peers[m.nodes[0].ID()].lim.SetBurst(refusalAuditBurst) // refill without waiting
	m.nodes[1].audits.peers[m.nodes[0].ID()].lim.SetLimit(1e9)
	m.nodes[1].audits.mu.Unlock()
	ev := event(t, m.nodes[0].Builder(), agentName(1))
	ev.Message.Payload = json.RawMessage(`{"event_type":"tampered"}`)
	c.refusal(ev)
	all := readAudit(t, m.nodes[1])
	last := all[len(all)-1]
	if last.Event != audit.EventRefused || last.Suppressed != refused-len(entries) {
		t.Fatalf("last entry %+v: want a refusal counting the %d not written", last, refused-len(entries))
	}
}

// Issue 13: an edited audit line made `run` refuse to start while the outbox waited. The node
// starts, on a new anchored segment, and says so.
func TestAudit_DamagedChainStartsANewSegmentAndTheNodeRuns(t *testing.T) {
	dir := t.TempDir()
	sk, _, _ := crypto.GenerateEd25519Key(nil)
	open := func() *Node {
		n, err := New(WithKey(sk), WithAgent(agentName(0), protocolManifest()), WithDataDir(dir), WithListen("/ip4/127.0.0.1/tcp/0"),
			WithNAT(false), WithDiscovery(false), WithGossip(false), WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatalf("the node did not start: %v", err)
		}
		return n
	}
	n := open()
	for i := 0; i < 2; i++ { // two entries: an edited line shows at the next one
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		_ = n.Send(ctx, event(t, n.Builder(), "test:mesh:nobody"), QueueUnknown()) // queued: nobody serves that agent
		cancel()
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "audit", "audit-000001.jsonl")
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log, []byte(strings.Replace(string(b), `"event":"sent"`, `"event":"sent","forged":1`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	n = open()
	defer n.Close()
	if n.Safety().AuditBroken == nil {
		t.Fatal("the node started without reporting the broken chain")
	}
	if entries, err := n.OutboxEntries(); err != nil || len(entries) != 2 {
		t.Fatalf("the queued message is gone: %v %v", entries, err)
	}
}

// A frame that claims to answer the node's own request is not charged to the peer's message
// rate, but only a few times per request: a peer repeating the claim with signatures that do
// not verify pays for them like any frame, and ends up over its rate.
func TestRate_RepeatedClaimsToAnswerARequestAreCharged(t *testing.T) {
	m := newMesh(t, 2, nil, func(i int, _ *mesh) []Option {
		if i == 0 {
			return []Option{WithRateLimit(0.1, 2)}
		}
		return nil
	})
	a := m.nodes[0]
	req, _ := a.Builder().Request(agentName(1), protocol.IntentHandoff, nil)
	if err := a.seal(req); err != nil {
		t.Fatal(err)
	}
	w, err := a.register(req)
	if err != nil {
		t.Fatal(err)
	}
	a.waitersMu.Lock()
	w.peer = m.nodes[1].ID()
	a.waitersMu.Unlock()
	defer a.unregister(req.Envelope.MessageID)
	c := dialRaw(t, m.nodes[1], a)
	forged, _ := m.nodes[1].Builder().Response(req, protocol.ResponseAccepted, map[string]any{"ok": true})
	forged.Message.Payload = []byte(`{"status":"accepted","tampered":true}`) // the signature no longer verifies
	var rateLimited bool
	const claims = 12 // replyCredit free, then the burst of 2, then over
	for i := 0; i < claims && !rateLimited; i++ {
		c.send(forged)
		r, err := c.next()
		if err != nil {
			break // the stream ended after the answer to the frame over the rate
		}
		if e, _ := protocol.ErrorOf(r); e != nil && e.Code == protocol.CodeRateLimited {
			rateLimited = true
		}
	}
	if !rateLimited {
		t.Fatalf("%d forged answers to one request and the peer was never over its rate", claims)
	}
}

// A message accepted while the node starts is handed over by its acceptance; re-offering what
// waited before the restart must not hand it over a second time (the protocol is served
// before the pending inbox is offered again).
func TestInbox_AMessageOfferedAgainIsHeldOnce(t *testing.T) {
	m := newMesh(t, 2, []Option{WithInbox(true)}, nil)
	a, b := m.nodes[0], m.nodes[1]
	if err := a.Send(testCtx(t), event(t, a.Builder(), agentName(1))); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 5*time.Second, "the message in the inbox", func() bool { return b.Inbox().Len() == 1 })
	pending, err := b.store.Pending()
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending %d, %v", len(pending), err)
	}
	b.engine.Redeliver(pending, delivery.Audited{})
	if n := b.Inbox().Len(); n != 1 {
		t.Fatalf("the inbox holds the message %d times", n)
	}
	if st := b.Safety(); st.InboxBytes != int(len(pending[0].Raw)) {
		t.Fatalf("the inbox counts %d bytes for one message of %d", st.InboxBytes, len(pending[0].Raw))
	}
}

// Review of issue 13: with one table of pins used least recently first, a peer claiming new
// ids could push out an honest agent's pin and then claim that id. A full table takes from the
// peer holding the most pins, and a peer may hold maxPinsPerPeer at most.
func TestTrust_AFloodOfNewIDsCannotPushOutAnotherAgentsPin(t *testing.T) {
	m := newMesh(t, 3, nil, func(i int, _ *mesh) []Option {
		return []Option{func(c *Config) error { c.MaxPins = 16; return nil }}
	})
	victim, target := m.nodes[0], m.nodes[1]
	c := dialRaw(t, victim, target)
	c.send(event(t, victim.Builder(), agentName(1)))
	if _, err := c.next(); err != nil {
		t.Fatal(err)
	}
	evil := dialRaw(t, m.nodes[2], target)
	refused := 0
	for i := 0; i < maxPinsPerPeer+8; i++ {
		b, _ := protocol.NewBuilder(fmt.Sprintf("test:flood:id%03d", i), m.keys[2], nil)
		if code, _ := evil.refusal(event(t, b, agentName(1))); code == protocol.CodeIdentityInvalid {
			refused++
		}
	}
	if p, ok := target.trust.peerOf(agentName(0)); !ok || p != victim.ID() {
		t.Fatal("the flood of new ids pushed out the victim's pin")
	}
	impostor, _ := protocol.NewBuilder(agentName(0), m.keys[2], nil)
	code, _ := evil.refusal(event(t, impostor, agentName(1)))
	expectCode(t, code, protocol.CodeIdentityInvalid)
	if refused != 0 {
		t.Fatalf("%d of the flooder's ids refused; the table of 16 should have made room from the flooder's own pins", refused)
	}
}

// A peer may be pinned to at most maxPinsPerPeer agent ids: the next new one is refused.
func TestTrust_APeerMaySpeakForALimitedNumberOfIDs(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	c := dialRaw(t, m.nodes[0], m.nodes[1])
	for i := 0; i < maxPinsPerPeer; i++ {
		b, _ := protocol.NewBuilder(fmt.Sprintf("test:many:id%03d", i), m.keys[0], nil)
		c.send(event(t, b, agentName(1)))
		if r, err := c.next(); err != nil || r.Message.Type != protocol.TypeResponse {
			t.Fatalf("id %d: %v %v", i, r, err)
		}
	}
	b, _ := protocol.NewBuilder("test:many:one-too-many", m.keys[0], nil)
	code, e := c.refusal(event(t, b, agentName(1)))
	expectCode(t, code, protocol.CodeIdentityInvalid)
	if !strings.Contains(e.Message, "already speaks for") {
		t.Fatalf("the refusal does not say why: %s", e.Message)
	}
}

// default_ttl is the ttl_seconds of the messages the node builds (it was validated, written
// by init, and read by nothing).
func TestConfig_DefaultTTLIsWhatTheNodeBuilds(t *testing.T) {
	m := newMesh(t, 1, []Option{func(c *Config) error { c.DefaultTTL = 2 * time.Hour; return nil }}, nil)
	ev, err := m.nodes[0].Builder().Event(agentName(0), protocol.IntentNotify, protocol.EventPayload{EventType: "x"})
	if err != nil || ev.Envelope.TTLSeconds != 7200 {
		t.Fatalf("ttl_seconds %d (%v), want 7200", ev.Envelope.TTLSeconds, err)
	}
}
