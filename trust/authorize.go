package trust

import (
	"fmt"
	"slices"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/protocol"
)

// Authorize checks what a message asks the node to do against what its sender was granted:
// the capabilities that the intent policy requires for its intent, and the ACP v2
// permissions it lists in security.permissions. They are granted by the sender's
// certificate (its permissions, authority mode) and by an A2ACP token in
// security.auth_token, which must pass the draft's five rules and name the sender as its
// sub. A token is checked whenever a message carries one. Responses and errors answer what
// this node asked and are not checked. A refusal names the rule that failed.
func (t *Trust) Authorize(m *protocol.Message, remote peer.ID) error {
	if t := m.Message.Type; t == protocol.TypeResponse || t == protocol.TypeError {
		return nil
	}
	sec, err := m.Security()
	if err != nil {
		return err
	}
	intentNeeds := t.cfg.IntentPolicy[string(m.Message.Intent)]
	if sec.AuthToken == "" && len(intentNeeds) == 0 && len(sec.Permissions) == 0 {
		return nil
	}
	required := append(slices.Clone(intentNeeds), sec.Permissions...) // Missing lists each once
	missing := authority.Missing(required, t.check.grants(remote))    // Claim verified its certificate
	if sec.AuthToken == "" {
		if len(missing) == 0 {
			return nil
		}
		return protocol.Errorf(protocol.CodePermissionDenied, "A2ACP token rule %d (%s): %s needs %q, which the certificate of %s does not grant, and the message carries no security.auth_token",
			int(authority.RuleCapabilities), authority.RuleCapabilities, needsWhat(m, intentNeeds, sec.Permissions), missing, m.Envelope.Sender.AgentID)
	}
	v := t.tokens
	if v == nil {
		return protocol.Errorf(authority.RuleIssuer.Code(), "A2ACP token rule %d (%s): this node trusts no token issuer (set authority, or token_issuers)", int(authority.RuleIssuer), authority.RuleIssuer)
	}
	tok, err := v.Token(sec.AuthToken, t.cfg.AgentID, missing)
	if err != nil {
		return err
	}
	if tok.Subject != m.Envelope.Sender.AgentID {
		return protocol.Errorf(protocol.CodeIdentityInvalid, "A2ACP token: sub %q is not the sender %s (a token authorises the agent it was issued to)", tok.Subject, m.Envelope.Sender.AgentID)
	}
	return nil
}

// IssuerKey returns the Ed25519 key of a token issuer id (a peer id that embeds its key).
func IssuerKey(id string) (crypto.PubKey, error) {
	p, err := peer.Decode(id)
	if err != nil {
		return nil, fmt.Errorf("%q is not an issuer id (an Ed25519 public key written as a peer id): %w", id, err)
	}
	k, err := p.ExtractPublicKey()
	if err != nil || k.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("%q does not embed an Ed25519 public key", id)
	}
	return k, nil
}

// tokenVerifierOptions trusts the configured token issuers.
func (t *Trust) tokenVerifierOptions() []authority.VerifierOption {
	opts := []authority.VerifierOption{authority.WithVerifierClock(t.cfg.Clock)}
	for _, id := range t.cfg.TokenIssuers {
		if k, err := IssuerKey(id); err == nil {
			opts = append(opts, authority.WithTrustedIssuer(id, k))
		}
	}
	return opts
}

// needsWhat says, for a refusal, what asked for the capabilities.
func needsWhat(m *protocol.Message, intentNeeds, permissions []string) string {
	switch {
	case len(intentNeeds) > 0 && len(permissions) > 0:
		return fmt.Sprintf("intent %s (by this node's intent_policy) with security.permissions", m.Message.Intent)
	case len(intentNeeds) > 0:
		return fmt.Sprintf("intent %s (by this node's intent_policy)", m.Message.Intent)
	}
	return "the message's security.permissions"
}
