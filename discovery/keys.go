package discovery

import (
	"fmt"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	mh "github.com/multiformats/go-multihash"

	"github.com/iacp-node/iacp-node/protocol"
)

// DHT namespaces of agent records. A record is stored under both keys.
const (
	// AgentNamespace holds records keyed by agent id: "/iacp-agent/<agent id>".
	AgentNamespace = "iacp-agent"
	// PeerNamespace holds the same records keyed by peer id: "/iacp-peer/<peer id>". It takes
	// a capability provider (a peer id) to its agent record.
	PeerNamespace = "iacp-peer"
)

// AgentKey returns the DHT key of an agent's record.
func AgentKey(agentID string) string { return "/" + AgentNamespace + "/" + agentID }

// PeerKey returns the DHT key of a peer's agent record.
func PeerKey(id peer.ID) string { return "/" + PeerNamespace + "/" + id.String() }

// Capability kinds, the three lists of a manifest.
const (
	KindTool   = "tool"
	KindModel  = "model"
	KindDomain = "domain"
)

// CapabilityCID returns the DHT provider key of a capability: a CIDv1 (raw codec) of the
// SHA2-256 multihash of "iacp/cap/<kind>/<normalized name>".
func CapabilityCID(kind, name string) (cid.Cid, error) {
	switch kind {
	case KindTool, KindModel, KindDomain:
	default:
		return cid.Undef, fmt.Errorf("capability kind %q is unknown; use %q, %q or %q", kind, KindTool, KindModel, KindDomain)
	}
	n := protocol.NormalizeCapability(name)
	if n == "" {
		return cid.Undef, fmt.Errorf("capability name is empty")
	}
	h, err := mh.Sum([]byte("iacp/cap/"+kind+"/"+n), mh.SHA2_256, -1)
	if err != nil {
		return cid.Undef, fmt.Errorf("capability key: %w", err)
	}
	return cid.NewCidV1(cid.Raw, h), nil
}

// capability is one (kind, normalized name) pair.
type capability struct{ kind, name string }

func (c capability) String() string { return c.kind + "/" + c.name }

// capabilitiesOf lists the capabilities of a set, normalized and without duplicates.
func capabilitiesOf(tools, models, domains []string) []capability {
	var out []capability
	seen := map[capability]bool{}
	add := func(kind string, names []string) {
		for _, n := range names {
			c := capability{kind, protocol.NormalizeCapability(n)}
			if c.name != "" && !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	add(KindTool, tools)
	add(KindModel, models)
	add(KindDomain, domains)
	return out
}
