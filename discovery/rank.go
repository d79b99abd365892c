package discovery

import (
	"fmt"
	"sort"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
	"github.com/libp2p/go-libp2p/core/peer"
)

// LoadSource reports an agent's live load, as its heartbeats tell it. The node sets one (from
// pubsub heartbeats) with WithLoadSource. Load must not block: Query calls it once per
// candidate while ranking, from the caller's goroutine.
type LoadSource interface {
	// Load returns the agent's last reported load (0 idle .. 1 saturated, lower ranks first),
	// whether it is alive, and whether anything is known about it at all. An agent known and
	// not alive is left out of query results; an unknown one ranks after every known load.
	Load(agentID string) (load float64, alive bool, known bool)
}

// Match is one agent that satisfies a capability query.
type Match struct {
	Record Record
	// PreferredMatches counts the query's preferred capabilities the manifest has.
	PreferredMatches int
	// Load is the live load from the LoadSource; meaningful when LoadKnown.
	Load      float64
	LoadKnown bool
	// Latency is the peerstore's latency EWMA to the agent's peer; meaningful when
	// LatencyKnown. An unknown latency never excludes an agent from a max_latency_ms query.
	Latency      time.Duration
	LatencyKnown bool
}

// Manifest is the matched agent's manifest.
func (m Match) Manifest() protocol.Manifest { return m.Record.Manifest }

// latencyFunc returns the known latency to a peer.
type latencyFunc func(peer.ID) (time.Duration, bool)

// validateQuery refuses a query that names no capability: a DHT cannot list every agent.
func validateQuery(q protocol.CapabilityQuery) error {
	if q.Required.Empty() && q.Preferred.Empty() {
		return protocol.Errorf(protocol.CodePayloadInvalid, "capability query names no required or preferred capability; name at least one")
	}
	if q.Constraints.MaxLatencyMs < 0 {
		return protocol.Errorf(protocol.CodePayloadInvalid, "max_latency_ms %d is negative", q.Constraints.MaxLatencyMs)
	}
	return nil
}

// hasAll reports whether set holds every capability in want.
func hasAll(set map[capability]bool, want []capability) bool {
	for _, c := range want {
		if !set[c] {
			return false
		}
	}
	return true
}

func manifestSet(m protocol.Manifest) map[capability]bool {
	set := map[capability]bool{}
	for _, c := range capabilitiesOf(m.Tools, m.Models, m.Domains) {
		set[c] = true
	}
	return set
}

// evaluate applies a capability query to records and ranks what passes (docs/discovery.md,
// "Ranking"): every required capability present, locality equal to the manifest's deployment
// (case-insensitive), latency within max_latency_ms when known, not known-dead; then more
// preferred matches first, then known loads lower first, unknown loads last, then agent id.
// It is pure: load and latency come from its arguments.
func evaluate(q protocol.CapabilityQuery, recs []Record, load LoadSource, latency latencyFunc) []Match {
	required := capabilitiesOf(q.Required.Tools, q.Required.Models, q.Required.Domains)
	preferred := capabilitiesOf(q.Preferred.Tools, q.Preferred.Models, q.Preferred.Domains)
	locality := protocol.NormalizeCapability(q.Constraints.Locality)
	maxLatency := time.Duration(q.Constraints.MaxLatencyMs) * time.Millisecond

	seen := map[string]bool{}
	var out []Match
	for _, r := range recs {
		if r.Left || seen[r.AgentID] {
			continue
		}
		set := manifestSet(r.Manifest)
		if !hasAll(set, required) {
			continue
		}
		if locality != "" && protocol.NormalizeCapability(r.Manifest.Deployment) != locality {
			continue
		}
		m := Match{Record: r}
		if latency != nil {
			m.Latency, m.LatencyKnown = latency(r.PeerID)
		}
		if maxLatency > 0 && m.LatencyKnown && m.Latency > maxLatency {
			continue
		}
		if load != nil {
			l, alive, known := load.Load(r.AgentID)
			if known && !alive {
				continue
			}
			m.Load, m.LoadKnown = l, known
		}
		for _, c := range preferred {
			if set[c] {
				m.PreferredMatches++
			}
		}
		seen[r.AgentID] = true
		out = append(out, m)
	}
	sort.SliceStable(out, func(i, j int) bool { return less(out[i], out[j]) })
	return out
}

// less is the ranking order.
func less(a, b Match) bool {
	if a.PreferredMatches != b.PreferredMatches {
		return a.PreferredMatches > b.PreferredMatches
	}
	if a.LoadKnown != b.LoadKnown {
		return a.LoadKnown
	}
	if a.LoadKnown && a.Load != b.Load {
		return a.Load < b.Load
	}
	return a.Record.AgentID < b.Record.AgentID
}

// String is a one-line description for logs and the CLI.
func (m Match) String() string {
	load := "unknown"
	if m.LoadKnown {
		load = fmt.Sprintf("%.2f", m.Load)
	}
	return fmt.Sprintf("%s peer=%s preferred=%d load=%s", m.Record.AgentID, m.Record.PeerID, m.PreferredMatches, load)
}
