package a2abridge

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/iacp-node/iacp-node/protocol"
)

// modelTag prefixes a model among a skill's tags: the manifest's domains are tags as they are,
// its models "model:NAME".
const modelTag = "model:"

// Interfaces are the A2A interfaces the bridge serves an agent on, endpoint being its base URL
// (ending in "/"): A2A 1.0 over JSON-RPC (POST endpoint) and HTTP+JSON (endpoint
// message:send, tasks/..., under the same base), and A2A 0.3 over JSON-RPC at the same URL,
// told apart by method name (server.go).
func Interfaces(endpoint string) []*a2a.AgentInterface {
	return []*a2a.AgentInterface{
		{URL: endpoint, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version},
		{URL: strings.TrimSuffix(endpoint, "/"), ProtocolBinding: a2a.TransportProtocolHTTPJSON, ProtocolVersion: a2a.Version},
		{URL: endpoint, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version},
	}
}

// CardOf is the A2A agent card of a mesh agent: its manifest's tools are the skills (a
// manifest without tools has one skill, "handoff"), each tagged with the domains and the models
// ("model:NAME"); endpoint is the base URL of its interfaces (Interfaces); the IACP extension
// names the agent id and, when peerID is not "", the agent's peer.
func CardOf(agentID string, m protocol.Manifest, endpoint, version, peerID string) *a2a.AgentCard {
	tags := slices.Clone(m.Domains)
	for _, md := range m.Models {
		tags = append(tags, modelTag+md)
	}
	var skills []a2a.AgentSkill
	for _, t := range m.Tools {
		skills = append(skills, a2a.AgentSkill{ID: t, Name: t, Description: "the IACP tool " + t + " of " + agentID, Tags: tags})
	}
	if len(skills) == 0 {
		skills = []a2a.AgentSkill{{ID: "handoff", Name: "handoff", Description: "hand a task to " + agentID, Tags: tags}}
	}
	name := m.Name
	if name == "" {
		name = agentID
	}
	if m.Version != "" {
		version = m.Version
	}
	params := map[string]any{"agent_id": agentID}
	if peerID != "" {
		params["peer_id"] = peerID
	}
	return &a2a.AgentCard{
		Name:                name,
		Description:         "The IACP mesh agent " + agentID + ", reached through an iacp-node A2A bridge.",
		SupportedInterfaces: Interfaces(endpoint),
		Version:             version,
		Capabilities: a2a.AgentCapabilities{Streaming: true, Extensions: []a2a.AgentExtension{{
			URI: ExtensionURI, Description: "the agent is an IACP mesh agent; params name it", Params: params}}},
		DefaultInputModes:  []string{"text/plain", "application/json"},
		DefaultOutputModes: []string{"application/json", "text/plain"},
		Skills:             skills,
	}
}

// ManifestOf is the IACP manifest of an A2A agent's card: the skill ids are the tools, the
// skills' tags the domains (and a "model:NAME" tag a model), the card's name and version the
// manifest's.
func ManifestOf(agentID string, card *a2a.AgentCard) protocol.Manifest {
	m := protocol.Manifest{AgentID: agentID, Name: card.Name, Version: card.Version}
	for _, s := range card.Skills {
		m.Tools = appendNew(m.Tools, s.ID)
		for _, t := range s.Tags {
			if md, ok := strings.CutPrefix(t, modelTag); ok {
				m.Models = appendNew(m.Models, md)
			} else {
				m.Domains = appendNew(m.Domains, t)
			}
		}
	}
	return m
}

func appendNew(s []string, v string) []string {
	if v == "" || slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// DefaultAgentID is the agent id an attached A2A agent takes when none is given:
// "a2a:HOST:NAME", from the host of the card's first interface and its name, each cut to the
// characters an agent id allows.
func DefaultAgentID(card *a2a.AgentCard) string {
	host := "remote"
	if len(card.SupportedInterfaces) > 0 {
		if u, err := url.Parse(card.SupportedInterfaces[0].URL); err == nil && u.Hostname() != "" {
			host = u.Hostname()
		}
	}
	return "a2a:" + segment(host, "remote") + ":" + segment(card.Name, "agent")
}

// segment keeps the letters, digits, '.', '_' and '-' of s (others become '-'), starting with
// a letter or digit; def when nothing remains.
func segment(s, def string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	out := strings.TrimLeft(string(b), "._-")
	if out == "" {
		return def
	}
	return out
}

// UnionCardJSON is card as the bridge serves it: the A2A 1.0 card, and the members an A2A
// 0.3 client reads beside them (url, preferredTransport, protocolVersion, additionalInterfaces,
// security, and each security scheme's 0.3 members next to its 1.0 ones), so that clients of
// either version read one document. The 0.3 members name the card's 0.3 interfaces; 1.0
// readers ignore them, and the card's signature does not cover them (CanonicalCard).
func UnionCardJSON(card *a2a.AgentCard) ([]byte, error) {
	raw, err := json.Marshal(card)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	var legacy []*a2a.AgentInterface
	for _, iface := range card.SupportedInterfaces {
		if iface.ProtocolVersion == a2av0.Version {
			legacy = append(legacy, iface)
		}
	}
	if len(legacy) > 0 {
		doc["url"], doc["preferredTransport"], doc["protocolVersion"] = legacy[0].URL, legacy[0].ProtocolBinding, "0.3.0"
		var more []map[string]any
		for _, iface := range legacy[1:] {
			more = append(more, map[string]any{"url": iface.URL, "transport": iface.ProtocolBinding})
		}
		if more != nil {
			doc["additionalInterfaces"] = more
		}
	}
	var security []map[string][]string
	for _, req := range card.SecurityRequirements {
		r := map[string][]string{}
		for name, scopes := range req {
			r[string(name)] = append([]string{}, scopes...)
		}
		security = append(security, r)
	}
	if security != nil {
		doc["security"] = security
	}
	schemes, _ := doc["securitySchemes"].(map[string]any)
	for name, s := range card.SecuritySchemes {
		entry, _ := schemes[string(name)].(map[string]any)
		if h, ok := s.(a2a.HTTPAuthSecurityScheme); ok && entry != nil {
			entry["type"], entry["scheme"] = "http", h.Scheme
			if h.Description != "" {
				entry["description"] = h.Description
			}
		}
	}
	return json.MarshalIndent(doc, "", "  ")
}
