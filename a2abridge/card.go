package a2abridge

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

// modelTag prefixes a model among a skill's tags: the manifest's domains are tags as they are,
// its models "model:NAME".
const modelTag = "model:"

// CardOf is the A2A agent card of a mesh agent: its manifest's tools are the skills (a
// manifest without tools has one skill, "handoff"), each tagged with the domains and the models
// ("model:NAME"); endpoint is the card's JSON-RPC URL; the IACP extension names the agent id
// and, when peerID is not "", the agent's peer.
func CardOf(agentID string, m protocol.Manifest, endpoint, version, peerID string) *a2a.AgentCard {
	tags := slices.Clone(m.Domains)
	for _, md := range m.Models {
		tags = append(tags, modelTag+md)
	}
	if tags == nil {
		tags = []string{}
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
		Name:               name,
		Description:        "The IACP mesh agent " + agentID + ", reached through an iacp-node A2A bridge.",
		URL:                endpoint,
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		ProtocolVersion:    ProtocolVersion,
		Version:            version,
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
// "a2a:HOST:NAME", from the card's URL host and its name, each cut to the characters an agent
// id allows.
func DefaultAgentID(card *a2a.AgentCard) string {
	host := "remote"
	if u, err := url.Parse(card.URL); err == nil && u.Hostname() != "" {
		host = u.Hostname()
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

// jwsHeader is the protected header of a card signature.
type jwsHeader struct {
	Alg string `json:"alg"`
	Typ string `json:"typ"`
	Kid string `json:"kid"`
}

var b64 = base64.RawURLEncoding

// cardPayload is what a card signature covers: the card without its signatures, in RFC 8785
// canonical JSON, base64url-encoded (the JWS payload, detached).
func cardPayload(card *a2a.AgentCard) (string, error) {
	c := *card
	c.Signatures = nil
	raw, err := json.Marshal(&c)
	if err != nil {
		return "", err
	}
	canon, err := protocol.CanonicalJSON(raw)
	if err != nil {
		return "", err
	}
	return b64.EncodeToString(canon), nil
}

// SignCard adds a JWS signature (RFC 7515, alg EdDSA, detached payload) to the card, made with
// the node's identity key: the payload is the card without signatures in RFC 8785 canonical
// JSON, as A2A's AgentCardSignature says, and the header's kid is the key's peer id, which
// holds the Ed25519 public key.
func SignCard(card *a2a.AgentCard, key crypto.PrivKey) error {
	if key.Type() != crypto.Ed25519 {
		return fmt.Errorf("sign card: the key is %s; cards are signed with Ed25519 (EdDSA)", key.Type())
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return err
	}
	hdr, err := json.Marshal(jwsHeader{Alg: "EdDSA", Typ: "JOSE", Kid: id.String()})
	if err != nil {
		return err
	}
	payload, err := cardPayload(card)
	if err != nil {
		return fmt.Errorf("sign card: %w", err)
	}
	protected := b64.EncodeToString(hdr)
	sig, err := key.Sign([]byte(protected + "." + payload))
	if err != nil {
		return err
	}
	card.Signatures = append(card.Signatures, a2a.AgentCardSignature{Protected: protected, Signature: b64.EncodeToString(sig)})
	return nil
}

// VerifyCard checks the card's first signature and returns the peer id that made it: the
// header must say EdDSA, its kid must be a peer id with an Ed25519 key, and the signature must
// cover the card as it is now.
func VerifyCard(card *a2a.AgentCard) (peer.ID, error) {
	if len(card.Signatures) == 0 {
		return "", fmt.Errorf("verify card: the card is not signed")
	}
	s := card.Signatures[0]
	raw, err := b64.DecodeString(s.Protected)
	if err != nil {
		return "", fmt.Errorf("verify card: protected header: %w", err)
	}
	var hdr jwsHeader
	if err := json.Unmarshal(raw, &hdr); err != nil || hdr.Alg != "EdDSA" {
		return "", fmt.Errorf("verify card: the protected header is not an EdDSA JWS header: %s", raw)
	}
	id, err := peer.Decode(hdr.Kid)
	if err != nil {
		return "", fmt.Errorf("verify card: kid %q is not a peer id: %w", hdr.Kid, err)
	}
	pub, err := id.ExtractPublicKey()
	if err != nil {
		return "", fmt.Errorf("verify card: kid %s holds no public key: %w", id, err)
	}
	rawPub, err := pub.Raw()
	if err != nil || pub.Type() != crypto.Ed25519 {
		return "", fmt.Errorf("verify card: kid %s is not an Ed25519 key", id)
	}
	sig, err := b64.DecodeString(s.Signature)
	if err != nil {
		return "", fmt.Errorf("verify card: signature: %w", err)
	}
	payload, err := cardPayload(card)
	if err != nil {
		return "", fmt.Errorf("verify card: %w", err)
	}
	if !ed25519.Verify(ed25519.PublicKey(rawPub), []byte(s.Protected+"."+payload), sig) {
		return "", fmt.Errorf("verify card: the signature does not verify: the card was changed or signed by another key")
	}
	return id, nil
}
