package discovery

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/iacp-node/iacp-node/internal/testsupport"
)

// trio returns three joined nodes, without a record cache, whose routing tables each hold the
// other two before anything is published: a record published from a table that then doubles
// goes stale and is republished (maybeStale), which would race what the tests compare. A node
// that joined before the last one learns of it at a refresh (or when that one queries it):
// refresh once all have joined, so that the wait does not hang on the DHT's schedule on a
// loaded machine.
func trio(t *testing.T) *mesh {
	t.Helper()
	m := newMesh(t, 3, 1, WithCacheTTL(0))
	m.waitJoined(t)
	for _, d := range m.ds {
		d.refreshRoutingTable()
	}
	for i, d := range m.ds {
		testsupport.WaitFor(t, 10*time.Second, fmt.Sprintf("node %d knows both others", i), func() bool { return d.Status().RoutingTableSize == 2 })
	}
	return m
}

// TestDirectFetchServesPublished: a node answers the direct record protocol with the exact
// record it last stored (nothing before Publish, the new record after a republish, the Left
// record after Leave), and the querier accepts it.
func TestDirectFetchServesPublished(t *testing.T) {
	m := trio(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := m.ds[0].fetchDirect(ctx, m.hosts[1].ID()); !errors.Is(err, errNoDirectRecord) {
		t.Fatalf("before Publish: %v, want %v", err, errNoDirectRecord)
	}
	m.publishAll(t, ctx)
	r, err := m.ds[0].fetchDirect(ctx, m.hosts[1].ID())
	if err != nil {
		t.Fatal(err)
	}
	if r.AgentID != agentID(1) || r.PeerID != m.hosts[1].ID() || r.Seq != m.ds[1].Status().Seq || r.Left {
		t.Fatalf("direct record %+v; want agent %s seq %d", r, agentID(1), m.ds[1].Status().Seq)
	}
	stored, err := m.ds[2].getRecord(ctx, PeerKey(m.hosts[1].ID()))
	if err != nil || stored.Seq != r.Seq {
		t.Fatalf("the DHT holds seq %d (%v); the peer served seq %d", stored.Seq, err, r.Seq)
	}
	if !bytes.Equal(m.ds[1].servedRecord(), mustStored(t, m, 1)) {
		t.Fatal("the served bytes are not the bytes stored in the DHT")
	}

	changed := manifestFor(1)
	changed.Tools = append(changed.Tools, "gpu")
	if err := m.ds[1].Publish(ctx, changed); err != nil {
		t.Fatal(err)
	}
	r, err = m.ds[0].fetchDirect(ctx, m.hosts[1].ID())
	if err != nil || r.Seq != m.ds[1].Status().Seq || !manifestSet(r.Manifest)[capability{KindTool, "gpu"}] {
		t.Fatalf("after republish: %+v, %v", r, err)
	}
	if err := m.ds[1].Leave(ctx); err != nil {
		t.Fatal(err)
	}
	r, err = m.ds[0].fetchDirect(ctx, m.hosts[1].ID())
	if err != nil || !r.Left || r.AgentID != agentID(1) {
		t.Fatalf("after Leave: %+v, %v; want the Left record", r, err)
	}
	// and a node's own record needs no stream
	r, err = m.ds[1].fetchDirect(ctx, m.hosts[1].ID())
	if err != nil || !r.Left {
		t.Fatalf("own record after Leave: %+v, %v", r, err)
	}
}

// mustStored returns the raw value the DHT of node 0 returns under node i's PeerKey.
func mustStored(t *testing.T, m *mesh, i int) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := m.ds[0].dht.GetValue(ctx, PeerKey(m.hosts[i].ID()))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// serveRaw replaces the direct record handler of host i with one that writes raw, then waits
// for the reader to go away.
func serveRaw(m *mesh, i int, raw []byte) {
	m.hosts[i].SetStreamHandler(m.ds[i].recordProtocol(), func(s network.Stream) {
		_, _ = s.Write(raw)
		_, _ = io.Copy(io.Discard, s)
		_ = s.Close()
	})
}

func frame(b []byte) []byte {
	var buf bytes.Buffer
	_ = writeFrame(&buf, b)
	return buf.Bytes()
}

// TestDirectFetchRefusesForeignAndForged: a provider that serves, directly, another peer's
// genuine record, or a record naming itself signed by another key, or garbage, or an oversized
// frame, is refused; the lookup falls back to the DHT and returns the provider's genuine record.
func TestDirectFetchRefusesForeignAndForged(t *testing.T) {
	m := newMesh(t, 4, 1, WithCacheTTL(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.waitJoined(t)
	m.publishAll(t, ctx)
	victim := m.hosts[2].ID()
	genuine, err := m.ds[0].getRecord(ctx, PeerKey(victim))
	if err != nil {
		t.Fatal(err)
	}

	foreign := m.ds[3].servedRecord() // valid, signed by node 3, names node 3
	forgedRec := genuine
	forgedRec.PeerID = m.hosts[3].ID()
	forgedRec.Seq = genuine.Seq + 1_000_000
	forged, err := SignRecord(forgedRec, m.keys[3])
	if err != nil {
		t.Fatal(err)
	}
	// the body now names the victim, the signature is node 3's
	forged = []byte(strings.ReplaceAll(string(forged), m.hosts[3].ID().String(), victim.String()))
	// The victim may republish meanwhile (its routing table grows as the mesh forms), so a
	// genuine record is the victim's own at the seq fetched or later, never the forged seq.
	isGenuine := func(r Record) bool {
		return r.PeerID == victim && r.AgentID == genuine.AgentID && r.Seq >= genuine.Seq && r.Seq != forgedRec.Seq
	}
	var huge [binary.MaxVarintLen64]byte
	hn := binary.PutUvarint(huge[:], MaxRecordBytes+1)

	cases := []struct {
		name, want string
		raw        []byte
	}{
		{"foreign", "stored under key", frame(foreign)},
		{"forged", "signature does not verify", frame(forged)},
		{"garbage", "not JSON", frame([]byte("{{{"))},
		{"oversized", "at most", append(huge[:hn], make([]byte, 100)...)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			serveRaw(m, 2, c.raw)
			_, err := m.ds[0].fetchDirect(ctx, victim)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("direct fetch: %v; want an error containing %q", err, c.want)
			}
			r, ok := m.ds[1].recordOfPeer(ctx, victim)
			if !ok || !isGenuine(r) {
				t.Fatalf("lookup after a refused direct record: %+v, %v; want the victim's own, seq %d or later", r, ok, genuine.Seq)
			}
			recs, err := m.ds[0].FindByCapability(ctx, KindTool, "web")
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, r := range recs {
				found = found || isGenuine(r)
			}
			if !found {
				t.Fatalf("FindByCapability lost the victim's genuine record: %v", recs)
			}
		})
	}
}

// TestDirectFetchStallHitsDeadline: a provider that accepts the stream and never answers costs
// the querier the direct fetch timeout, then the DHT answers.
func TestDirectFetchStallHitsDeadline(t *testing.T) {
	m := newMesh(t, 3, 1, WithCacheTTL(0), WithDirectFetchTimeout(300*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.waitJoined(t)
	m.publishAll(t, ctx)
	stalled := make(chan struct{}, 1)
	m.hosts[2].SetStreamHandler(m.ds[2].recordProtocol(), func(s network.Stream) {
		select {
		case stalled <- struct{}{}:
		default:
		}
		_, _ = io.Copy(io.Discard, s) // returns when the querier resets
		_ = s.Reset()
	})
	_, err := m.ds[0].fetchDirect(ctx, m.hosts[2].ID())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stalled direct fetch: %v; want a deadline error", err)
	}
	select {
	case <-stalled:
	default:
		t.Fatal("the stalling handler was never reached; the test proves nothing")
	}
	r, ok := m.ds[0].recordOfPeer(ctx, m.hosts[2].ID())
	if !ok || r.AgentID != agentID(2) || r.Seq != m.ds[2].Status().Seq {
		t.Fatalf("DHT fallback after a stall: %+v, %v", r, ok)
	}
}

// TestReadFrameBounds: a frame announcing more than the bound is refused from its header,
// before its body is read or allocated (an announced 2^60 bytes would not fit in memory).
func TestReadFrameBounds(t *testing.T) {
	var hdr [binary.MaxVarintLen64]byte
	for _, n := range []uint64{MaxRecordBytes + 1, 1 << 60} {
		k := binary.PutUvarint(hdr[:], n)
		_, err := readFrame(bytes.NewReader(hdr[:k]), MaxRecordBytes)
		if err == nil || !strings.Contains(err.Error(), "at most") {
			t.Fatalf("announced %d: %v; want the size refusal", n, err)
		}
	}
	b, err := readFrame(bytes.NewReader(frame([]byte("abc"))), MaxRecordBytes)
	if err != nil || string(b) != "abc" {
		t.Fatalf("round trip: %q, %v", b, err)
	}
	if _, err := readFrame(bytes.NewReader(frame([]byte("abcdef"))[:4]), MaxRecordBytes); err == nil {
		t.Fatal("a truncated frame was accepted")
	}
}

// A record misplaced by the mesh's growth is moved under its agent key only, the key agent
// lookups walk to: the peer key keeps the record it had until the next full publish, and so
// does the republish schedule.
func TestMisplacedRecordMovesUnderItsAgentKeyOnly(t *testing.T) {
	m := trio(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.publishAll(t, ctx)
	d := m.ds[1]
	first := d.Status().Seq
	d.mu.Lock()
	published := d.local.published
	d.local.misplaced = true
	d.mu.Unlock()
	if err := d.publishLocal(ctx, true); err != nil {
		t.Fatal(err)
	}
	byAgent, err := m.ds[2].getRecord(ctx, AgentKey(agentID(1)))
	if err != nil || byAgent.Seq <= first {
		t.Fatalf("under the agent key: seq %d (%v); want one newer than %d", byAgent.Seq, err, first)
	}
	byPeer, err := m.ds[2].getRecord(ctx, PeerKey(m.hosts[1].ID()))
	if err != nil || byPeer.Seq != first {
		t.Fatalf("under the peer key: seq %d (%v); want the published %d", byPeer.Seq, err, first)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.local.misplaced || d.local.published != published {
		t.Fatalf("after the move: misplaced %v, published moved from %v to %v", d.local.misplaced, published, d.local.published)
	}
}
