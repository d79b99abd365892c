package discovery

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
	"github.com/libp2p/go-libp2p/core/peer"
)

func rec(t *testing.T, id string, deployment string, tools, domains []string) Record {
	_, pid := testKey(t)
	return Record{AgentID: id, PeerID: pid, Manifest: protocol.Manifest{AgentID: id, Tools: tools, Domains: domains, Deployment: deployment}}
}

func ids(ms []Match) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Record.AgentID)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestEvaluateRanking(t *testing.T) {
	recs := []Record{
		rec(t, "a:h:missing", "on-prem", []string{"terminal"}, []string{"security", "compliance"}),
		rec(t, "a:h:both-busy", "on-prem", []string{"Terminal", "web"}, []string{"security", "compliance"}),
		rec(t, "a:h:both-idle", "on-prem", []string{"terminal", "web"}, []string{"security", "compliance"}),
		rec(t, "a:h:one-unknown", "on-prem", []string{"terminal", "web"}, []string{"security"}),
		rec(t, "a:h:one-idle", "on-prem", []string{"terminal", "web"}, []string{"compliance"}),
		rec(t, "a:h:none-b", "on-prem", []string{"terminal", "web"}, nil),
		rec(t, "a:h:none-a", "on-prem", []string{"terminal", "web"}, nil),
		rec(t, "a:h:dead", "on-prem", []string{"terminal", "web"}, []string{"security", "compliance"}),
		rec(t, "a:h:cloud", "cloud", []string{"terminal", "web"}, []string{"security", "compliance"}),
	}
	left := rec(t, "a:h:left", "on-prem", []string{"terminal", "web"}, []string{"security"})
	left.Left = true
	recs = append(recs, left, recs[2]) // a Left record and a duplicate are ignored
	load := loads{
		"a:h:both-busy": {0.9, true},
		"a:h:both-idle": {0.1, true},
		"a:h:one-idle":  {0.0, true},
		"a:h:dead":      {0.0, false},
		"a:h:none-b":    {0.5, true},
	}
	q := protocol.CapabilityQuery{
		Required:    protocol.CapabilitySet{Tools: []string{"terminal", "WEB"}},
		Preferred:   protocol.CapabilitySet{Domains: []string{"security", "compliance"}},
		Constraints: protocol.QueryConstraints{Locality: "On-Prem"},
	}
	got := ids(evaluate(q, recs, load, nil))
	want := []string{"a:h:both-idle", "a:h:both-busy", "a:h:one-idle", "a:h:one-unknown", "a:h:none-b", "a:h:none-a"}
	if !equal(got, want) {
		t.Fatalf("ranking\n got %v\nwant %v", got, want)
	}
	// the order does not depend on the input order
	for range 20 {
		shuffled := append([]Record(nil), recs...)
		rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if g := ids(evaluate(q, shuffled, load, nil)); !equal(g, want) {
			t.Fatalf("ranking depends on input order: %v", g)
		}
	}
	// no load source: every load unknown, so preferred matches then agent id
	got = ids(evaluate(q, recs, nil, nil))
	want = []string{"a:h:both-busy", "a:h:both-idle", "a:h:dead", "a:h:one-idle", "a:h:one-unknown", "a:h:none-a", "a:h:none-b"}
	if !equal(got, want) {
		t.Fatalf("ranking without loads\n got %v\nwant %v", got, want)
	}
}

func TestEvaluateLatency(t *testing.T) {
	fast := rec(t, "a:h:fast", "", []string{"web"}, nil)
	slow := rec(t, "a:h:slow", "", []string{"web"}, nil)
	unknown := rec(t, "a:h:unknown", "", []string{"web"}, nil)
	lat := func(p peer.ID) (time.Duration, bool) {
		switch p {
		case fast.PeerID:
			return 5 * time.Millisecond, true
		case slow.PeerID:
			return 500 * time.Millisecond, true
		}
		return 0, false
	}
	q := protocol.CapabilityQuery{Required: protocol.CapabilitySet{Tools: []string{"web"}}, Constraints: protocol.QueryConstraints{MaxLatencyMs: 100}}
	ms := evaluate(q, []Record{slow, unknown, fast}, nil, lat)
	if g := ids(ms); !equal(g, []string{"a:h:fast", "a:h:unknown"}) {
		t.Fatalf("latency filter kept %v", g)
	}
	if !ms[0].LatencyKnown || ms[1].LatencyKnown {
		t.Fatalf("latency known flags wrong: %+v", ms)
	}
}

func TestValidateQuery(t *testing.T) {
	err := validateQuery(protocol.CapabilityQuery{})
	if !errors.Is(err, protocol.ErrPayloadInvalid) {
		t.Fatalf("empty query: %v", err)
	}
	if err := validateQuery(protocol.CapabilityQuery{Preferred: protocol.CapabilitySet{Tools: []string{"x"}}}); err != nil {
		t.Fatalf("preferred-only query refused: %v", err)
	}
}

func TestCombine(t *testing.T) {
	_, a := testKey(t)
	_, b := testKey(t)
	_, c := testKey(t)
	sets := [][]peer.ID{{a, b, b}, {b, c}}
	if got := combine(sets, true); len(got) != 1 || got[0] != b {
		t.Fatalf("intersection = %v", got)
	}
	if got := combine(sets, false); len(got) != 3 {
		t.Fatalf("union = %v", got)
	}
}

func TestCapabilityCID(t *testing.T) {
	a, err := CapabilityCID(KindTool, " Terminal")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := CapabilityCID(KindTool, "terminal")
	c, _ := CapabilityCID(KindModel, "terminal")
	if !a.Equals(b) || a.Equals(c) {
		t.Fatal("capability keys must normalise names and separate kinds")
	}
	if _, err := CapabilityCID("gadget", "x"); err == nil {
		t.Fatal("unknown kind accepted")
	}
	if _, err := CapabilityCID(KindTool, "  "); err == nil {
		t.Fatal("empty name accepted")
	}
}
