package node

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/protocol"
)

// JoinProtocolID is the protocol on which the mesh authority's node turns an invitation into
// an agent certificate. The joiner proves it holds the invitation's secret with an HMAC over
// its own peer id and agent id (authority.Proof), so a proof seen on the wire is worth
// nothing to another peer; the secret itself never travels.
const JoinProtocolID = "/iacp/join/1.0.0"

// InvitesFile holds the authority's outstanding invitations (authority.InviteBook).
const InvitesFile = "invites.json"

const (
	joinTimeout    = 10 * time.Second
	maxJoinRequest = 4 << 10
	maxJoinAnswer  = authority.MaxCertBytes + 1<<10
)

type joinRequest struct {
	InviteID     string   `json:"invite_id"`
	Proof        string   `json:"proof"`
	AgentID      string   `json:"agent_id"`
	Capabilities []string `json:"capabilities,omitempty"`
}

type joinAnswer struct {
	Cert  string `json:"cert,omitempty"`
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
}

// openAuthority opens, on the mesh authority's node, the invitation book and the certificate
// registry in the data directory. Without a data directory the node renews certificates and
// issues tokens, but neither invites (invitations must be remembered) nor revokes.
func (n *Node) openAuthority() error {
	if n.cfg.MeshAuthority == nil || n.cfg.DataDir == "" {
		return nil
	}
	book, err := authority.OpenInviteBook(filepath.Join(n.cfg.DataDir, InvitesFile), n.cfg.Clock)
	if err != nil {
		return fmt.Errorf("invitations: %w", err)
	}
	reg, err := authority.OpenRegistry(filepath.Join(n.cfg.DataDir, RegistryFile), n.cfg.Clock)
	if err != nil {
		return err
	}
	n.invites, n.registry = book, reg
	return nil
}

// serveAuthorityProtocols serves JoinProtocolID and AuthorityProtocolID on the mesh
// authority's node.
func (n *Node) serveAuthorityProtocols() {
	if n.cfg.MeshAuthority == nil {
		return
	}
	if n.invites != nil {
		n.host.SetStreamHandler(JoinProtocolID, n.tracked(n.serveJoin))
	}
	n.host.SetStreamHandler(AuthorityProtocolID, n.tracked(n.serveAuthority))
}

// Invite creates a one-time invitation to this mesh on terms t (authority.InviteTerms: the
// agent id it is bound to, "" for any id no other peer holds; its life, 0 for
// authority.DefaultInviteTTL; the permissions its certificate grants; whether the joiner
// replaces the id's current holder). It returns the token that `iacp-node init --join`
// takes. An invitation for an id another peer holds is refused unless t.Replace. Only the mesh
// authority's node can invite.
func (n *Node) Invite(t authority.InviteTerms) (token string, expires time.Time, err error) {
	if n.invites == nil {
		return "", time.Time{}, protocol.Errorf(protocol.CodePermissionDenied, "this node is not the mesh authority (it holds no %s in a data directory): invite from the node that founded the mesh", AuthorityKeyFile)
	}
	agentID := t.AgentID
	if agentID != "" {
		if err := protocol.ValidateAgentID(agentID); err != nil {
			return "", time.Time{}, err
		}
		if held := n.registry.Holders(agentID, ""); len(held) > 0 && !t.Replace {
			return "", time.Time{}, protocol.Errorf(protocol.CodePermissionDenied, "agent %s is held by peer %s (certificate %s): invite for another agent id, or with replace (iacp-node invite --agent %s --replace) to move it to the joiner, revoking the holder's certificates",
				agentID, held[0].Peer, held[0].ID, agentID)
		}
	}
	secret, expires, err := n.invites.Create(t)
	if err != nil {
		return "", time.Time{}, err
	}
	var addrs []string
	for _, a := range n.Addrs() {
		addrs = append(addrs, a.String())
	}
	if len(addrs) > authority.MaxInviteAddrs {
		addrs = addrs[:authority.MaxInviteAddrs]
	}
	inv := authority.Invite{Addrs: addrs, Authority: n.cfg.MeshAuthority.ID(), AuthorityKey: n.cfg.MeshAuthority.PublicKey(),
		Secret: secret, AgentID: agentID, Expires: expires}
	return inv.Encode(), expires, nil
}

// serveJoin redeems one invitation. Everything the joiner sends is checked before anything is
// written: the proof (for this peer and agent id), then the one-time use. The peer and agent
// that redeemed an invitation may ask again (a joiner whose answer was lost in a timeout, or
// `iacp-node init --join` run again): they get the certificate they were given, or a new one
// if this node restarted since (the registry bounds how many one agent holds).
func (n *Node) serveJoin(s network.Stream) {
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(joinTimeout))
	remote := s.Conn().RemotePeer()
	answer := func(a joinAnswer) {
		raw, _ := json.Marshal(a)
		if protocol.WriteFrame(s, raw) != nil {
			s.Reset()
		}
	}
	fail := func(err error) {
		n.quiet.Warn(string(remote), "join refused", "peer", remote, "err", err.Error())
		answer(joinAnswer{Error: err.Error(), Code: string(protocol.CodeOf(err))})
	}
	if err := n.rate.allow(remote, n.now()); err != nil {
		fail(err)
		return
	}
	body, err := protocol.ReadFrame(s, maxJoinRequest)
	if err != nil {
		s.Reset()
		return
	}
	var req joinRequest
	if err := json.Unmarshal(body, &req); err != nil {
		fail(protocol.Errorf(protocol.CodePayloadInvalid, "join request: %v", err))
		return
	}
	proof, err := base64.RawURLEncoding.DecodeString(req.Proof)
	if err != nil {
		fail(protocol.Errorf(protocol.CodePayloadInvalid, "join request: proof: %v", err))
		return
	}
	if err := protocol.ValidateAgentID(req.AgentID); err != nil {
		fail(err)
		return
	}
	if held := n.registry.Holders(req.AgentID, remote); len(held) > 0 && !n.invites.Replaces(req.InviteID) {
		// Refused before the invitation is used, so that the joiner can choose another id.
		fail(protocol.Errorf(protocol.CodePermissionDenied, "%w: agent %s is held by another peer; join with another agent id (iacp-node init --join TOKEN --agent-id ID)", authority.ErrHeldElsewhere, req.AgentID))
		return
	}
	red, err := n.invites.RedeemProof(req.InviteID, proof, remote, req.AgentID)
	if err != nil {
		fail(err)
		return
	}
	if red.Cert != "" {
		// The joiner asks again for what it was given: its first answer was lost.
		n.log.Info("join: certificate given again", "agent", req.AgentID, "peer", remote)
		answer(joinAnswer{Cert: red.Cert})
		return
	}
	cert, err := n.issueJoined(req, remote, red)
	if err != nil {
		fail(err)
		return
	}
	n.invites.Issued(req.InviteID, cert.Raw)
	n.log.Info("join: certificate issued", "agent", req.AgentID, "peer", remote, "certificate", cert.ID, "expires", cert.Expires, "again", red.Again)
	answer(joinAnswer{Cert: cert.Raw})
}

// issueJoined issues and records the certificate a redeemed invitation grants. One that
// replaces the agent id's holder revokes the holder's certificates and broadcasts the list.
func (n *Node) issueJoined(req joinRequest, remote peer.ID, red authority.Redemption) (*authority.Certificate, error) {
	cert, err := n.cfg.MeshAuthority.Issue(authority.CertRequest{AgentID: req.AgentID, Peer: remote, Capabilities: req.Capabilities, Permissions: red.Grants})
	if err != nil {
		return nil, err
	}
	if !red.Replace {
		return cert, n.recordIssued(cert)
	}
	crl, revoked, err := n.registry.RecordReplacing(n.cfg.MeshAuthority, cert)
	if err != nil {
		return nil, recordError(err)
	}
	if crl != "" {
		for _, c := range revoked {
			n.log.Warn("certificate revoked: its agent id moved to another peer", "agent", c.AgentID, "peer", c.Peer, "certificate", c.ID, "new_peer", remote)
		}
		if err := n.certs.applyRevocations(crl); err != nil {
			return nil, protocol.Errorf(protocol.CodeInternalError, "the revocation list just signed does not verify: %v", err)
		}
		if err := n.broadcastRevocations(n.ctx, crl); err != nil {
			n.log.Warn("the revocation list of a replacement was not broadcast (peers catch up within a minute)", "err", err.Error())
		}
	}
	return cert, nil
}

// Join redeems the invitation inv for agentID with the mesh authority's node, from host h
// (whose key is the joining node's identity), and returns the agent certificate, verified.
// It dials the invitation's addresses in order until one answers.
func Join(ctx context.Context, h host.Host, inv authority.Invite, agentID string, capabilities []string) (*authority.Certificate, error) {
	if inv.AgentID != "" && inv.AgentID != agentID {
		return nil, fmt.Errorf("the invitation is for agent %s, not %s", inv.AgentID, agentID)
	}
	req := joinRequest{InviteID: authority.InviteID(inv.Secret), AgentID: agentID, Capabilities: capabilities,
		Proof: base64.RawURLEncoding.EncodeToString(authority.Proof(inv.Secret, h.ID(), agentID))}
	var errs []error
	for _, s := range inv.Addrs {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s, err))
			continue
		}
		ai, err := peer.AddrInfoFromP2pAddr(a)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s, err))
			continue
		}
		ans, err := joinOnce(ctx, h, *ai, req)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s, err))
			continue
		}
		if ans.Error != "" {
			return nil, &protocol.Error{Code: protocol.Code(ans.Code), Message: "the mesh authority refused to join: " + ans.Error}
		}
		v := authority.NewVerifier(inv.AuthorityKey)
		return v.Certificate(ans.Cert, h.ID(), agentID)
	}
	return nil, fmt.Errorf("no address of the invitation answered: %w", errors.Join(errs...))
}

func joinOnce(ctx context.Context, h host.Host, ai peer.AddrInfo, req joinRequest) (joinAnswer, error) {
	var ans joinAnswer
	ctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	if err := h.Connect(ctx, ai); err != nil {
		return ans, err
	}
	return ans, askOnce(ctx, h, ai.ID, JoinProtocolID, joinTimeout, req, maxJoinAnswer, &ans)
}
