package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/internal/fsutil"
	"github.com/iacp-node/iacp-node/protocol"
)

// AuthorityProtocolID is the protocol on which the mesh authority's node renews agent
// certificates and issues A2ACP tokens. The asking peer shows its certificate, and the
// authority verifies it against the connection's authenticated peer: a node renews only its
// own certificate and obtains tokens only for its own agent.
const AuthorityProtocolID = "/iacp/authority/1.0.0"

// The authority protocol's bounds.
const (
	authorityTimeout    = 10 * time.Second
	maxAuthorityRequest = authority.MaxCertBytes + 4<<10
	maxAuthorityAnswer  = authority.MaxCertBytes + authority.MaxTokenBytes + 1<<10
	// renewRetryMin and renewRetryMax bound the wait after a failed renewal.
	renewRetryMin = time.Minute
	renewRetryMax = time.Hour
)

// The authority protocol's operations.
const (
	opRenew = "renew"
	opToken = "token"
)

// TokenRequest asks the mesh authority for an A2ACP token: the A2ACP draft's `POST
// /auth/token` body (specs/003, "Token Acquisition").
type TokenRequest struct {
	// AgentID is the calling agent, the token's sub; "" means this node's agent. A node
	// obtains tokens only for its own agent.
	AgentID string `json:"agent_id,omitempty"`
	// TargetAgentID is the agent the token lets it call, the token's aud.
	TargetAgentID string `json:"target_agent_id"`
	// RequestedCapabilities must all be granted by the caller's certificate (its
	// permissions, set when it was invited: `iacp-node invite --grant`).
	RequestedCapabilities []string `json:"requested_capabilities,omitempty"`
	// TTL is the lifetime in seconds: authority.DefaultTokenTTL when 0, at most
	// authority.MaxTokenTTL.
	TTL int64 `json:"ttl,omitempty"`
}

type authorityRequest struct {
	Op    string        `json:"op"`
	Cert  string        `json:"cert"`
	Token *TokenRequest `json:"token,omitempty"`
}

type authorityAnswer struct {
	Cert  string `json:"cert,omitempty"`
	Token string `json:"token,omitempty"`
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
}

// serveAuthority answers one renewal or token request on the mesh authority's node.
func (n *Node) serveAuthority(s network.Stream) {
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(authorityTimeout))
	remote := s.Conn().RemotePeer()
	answer := func(a authorityAnswer) {
		raw, _ := json.Marshal(a)
		if protocol.WriteFrame(s, raw) != nil {
			s.Reset()
		}
	}
	if err := n.rate.allow(remote, n.now()); err != nil {
		answer(authorityAnswer{Error: err.Error(), Code: string(protocol.CodeOf(err))})
		return
	}
	body, err := protocol.ReadFrame(s, maxAuthorityRequest)
	if err != nil {
		s.Reset()
		return
	}
	var req authorityRequest
	if err := json.Unmarshal(body, &req); err != nil {
		answer(authorityAnswer{Error: "authority request: " + err.Error(), Code: string(protocol.CodePayloadInvalid)})
		return
	}
	a, err := n.authorityAnswer(remote, req)
	if err != nil {
		n.quiet.Warn(string(remote), "authority request refused", "peer", remote, "op", req.Op, "err", err.Error())
		a = authorityAnswer{Error: err.Error(), Code: string(protocol.CodeOf(err))}
	}
	answer(a)
}

// authorityAnswer runs a request of remote, which showed the certificate req.Cert.
func (n *Node) authorityAnswer(remote peer.ID, req authorityRequest) (authorityAnswer, error) {
	cert, err := n.certs.v.Certificate(req.Cert, remote, "")
	if err != nil {
		return authorityAnswer{}, err
	}
	switch req.Op {
	case opRenew:
		c, err := n.renewFor(cert)
		if err != nil {
			return authorityAnswer{}, err
		}
		return authorityAnswer{Cert: c.Raw}, nil
	case opToken:
		if req.Token == nil {
			return authorityAnswer{}, protocol.Errorf(protocol.CodePayloadInvalid, "token request: no token member")
		}
		t, err := n.issueToken(cert, *req.Token)
		if err != nil {
			return authorityAnswer{}, err
		}
		return authorityAnswer{Token: t.Raw}, nil
	}
	return authorityAnswer{}, protocol.Errorf(protocol.CodePayloadInvalid, "authority request: unknown op %q (renew or token)", req.Op)
}

// renewFor issues the successor of a valid certificate: same agent, peer, capabilities and
// permissions, a full lifetime from now. A certificate with more than half its lifetime left
// is not renewed yet, and the registry records at most authority.MaxPerHolder certificates of
// one agent on one peer, so that nobody grows the registry by renewing in a loop (a renewed
// certificate stays valid, and could be shown again).
func (n *Node) renewFor(c *authority.Certificate) (*authority.Certificate, error) {
	now := n.now()
	life := c.Expires.Sub(c.IssuedAt)
	if early := c.Expires.Add(-life / 2); now.Before(early) {
		return nil, protocol.Errorf(protocol.CodePermissionDenied, "certificate %s of %s is renewed from %s, in its last half", c.ID, c.AgentID, early.UTC().Format(time.RFC3339))
	}
	next, err := n.cfg.MeshAuthority.Issue(authority.CertRequest{AgentID: c.AgentID, Peer: c.Peer,
		Capabilities: c.Capabilities, Permissions: c.Permissions, TTL: life, HeldSince: c.HeldSince})
	if err != nil {
		return nil, err
	}
	if err := n.recordIssued(next); err != nil {
		return nil, err
	}
	n.log.Info("certificate renewed", "agent", c.AgentID, "peer", c.Peer, "certificate", next.ID, "expires", next.Expires)
	return next, nil
}

// issueToken signs an A2ACP token for the agent that c certifies, with capabilities its
// permissions grant.
func (n *Node) issueToken(c *authority.Certificate, req TokenRequest) (*authority.Token, error) {
	if req.AgentID != "" && req.AgentID != c.AgentID {
		return nil, protocol.Errorf(protocol.CodePermissionDenied, "a token for %s: peer %s is certified for %s, and obtains tokens for it alone", req.AgentID, c.Peer, c.AgentID)
	}
	if err := protocol.ValidateAgentID(req.TargetAgentID); err != nil {
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "target_agent_id: %v", err)
	}
	if req.TTL < 0 {
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "ttl %d: must be 0 (the default) or more", req.TTL)
	}
	if missing := authority.Missing(req.RequestedCapabilities, c.Permissions); len(missing) > 0 {
		return nil, protocol.Errorf(protocol.CodePermissionDenied, "%s is not granted %q (its certificate grants %q; the mesh's operator grants permissions with iacp-node invite --grant)", c.AgentID, missing, c.Permissions)
	}
	t, err := n.cfg.MeshAuthority.IssueToken(authority.TokenRequest{Subject: c.AgentID, Audience: req.TargetAgentID,
		Capabilities: req.RequestedCapabilities, TTL: time.Duration(req.TTL) * time.Second})
	if err != nil {
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "%v", err)
	}
	return t, nil
}

// recordIssued records a certificate in the registry, when the node keeps one.
func (n *Node) recordIssued(c *authority.Certificate) error {
	if n.registry == nil {
		return nil
	}
	return recordError(n.registry.Record(c))
}

// recordError is the answer to a registry's error: its refusals of the asker (ErrHolderFull,
// ErrHeldElsewhere) keep their code, anything else is the authority's own failure.
func recordError(err error) error {
	if err == nil {
		return nil
	}
	if _, refused := errors.AsType[*protocol.Error](err); refused {
		return err
	}
	return protocol.Errorf(protocol.CodeInternalError, "%v", err)
}

// Token obtains an A2ACP token from the mesh authority for this node's agent to call
// req.TargetAgentID with req.RequestedCapabilities: what `POST /auth/token` answers. The
// authority's own node signs it itself; any other asks the authority's node over the mesh.
func (n *Node) Token(ctx context.Context, req TokenRequest) (*authority.Token, error) {
	if n.certs == nil {
		return nil, protocol.Errorf(protocol.CodePermissionDenied, "tokens come from the mesh authority, and this node runs trust: open (no authority)")
	}
	if req.AgentID != "" && req.AgentID != n.cfg.AgentID {
		return nil, protocol.Errorf(protocol.CodePermissionDenied, "this node serves %s and obtains tokens for it alone, not for %s", n.cfg.AgentID, req.AgentID)
	}
	own := n.certs.own.Load()
	if n.cfg.MeshAuthority != nil {
		return n.issueToken(own, req)
	}
	ans, err := n.askAuthority(ctx, authorityRequest{Op: opToken, Cert: own.Raw, Token: &req})
	if err != nil {
		return nil, err
	}
	return n.certs.v.Token(ans.Token, req.TargetAgentID, req.RequestedCapabilities)
}

// authorityPeers returns the peers that may be the mesh authority's node: authority_node
// when configured, else the bootstrap peers (an invitation's addresses are the authority
// node's, and `init --join` makes them the bootstrap peers). The node's bootstrap list has one
// entry per peer and leaves the node out (discovery.MergePeers), so each is asked once.
func (n *Node) authorityPeers() []peer.ID {
	if n.cfg.AuthorityNode != "" {
		if p, err := peer.Decode(n.cfg.AuthorityNode); err == nil {
			return []peer.ID{p}
		}
	}
	out := make([]peer.ID, 0, len(n.bootstrap))
	for _, ai := range n.bootstrap {
		out = append(out, ai.ID)
	}
	return out
}

// askAuthority sends req to the mesh authority's node and returns its answer; a refusal is a
// *protocol.Error with the authority's code.
func (n *Node) askAuthority(ctx context.Context, req authorityRequest) (authorityAnswer, error) {
	peers := n.authorityPeers()
	if len(peers) == 0 {
		return authorityAnswer{}, protocol.Errorf(protocol.CodeAgentNotFound, "no way to reach the mesh authority's node: set authority_node (its peer id) or bootstrap in the config")
	}
	var errs []error
	for _, p := range peers {
		var ans authorityAnswer
		if err := askOnce(ctx, n.host, p, AuthorityProtocolID, authorityTimeout, req, maxAuthorityAnswer, &ans); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		if ans.Error != "" {
			return ans, &protocol.Error{Code: protocol.Code(ans.Code), Message: "the mesh authority refused: " + ans.Error}
		}
		return ans, nil
	}
	return authorityAnswer{}, protocol.Errorf(protocol.CodeAgentNotFound, "the mesh authority's node did not answer: %v", errors.Join(errs...))
}

// renewIn returns how long until the node's own certificate is due for renewal: when a third
// of its lifetime is left.
func (n *Node) renewIn() time.Duration {
	c := n.certs.own.Load()
	life := c.Expires.Sub(c.IssuedAt)
	return max(c.Expires.Add(-life/3).Sub(n.now()), 0)
}

// renewOwn renews the node's own certificate, from the mesh authority or, on its own node,
// by issuing the successor itself, saves it and installs it. It returns when to try next.
func (n *Node) renewOwn() time.Duration {
	own := n.certs.own.Load()
	var next *authority.Certificate
	var err error
	if n.cfg.MeshAuthority != nil {
		next, err = n.renewFor(own)
	} else {
		var ans authorityAnswer
		if ans, err = n.askAuthority(n.ctx, authorityRequest{Op: opRenew, Cert: own.Raw}); err == nil {
			next, err = n.certs.v.Certificate(ans.Cert, n.host.ID(), n.cfg.AgentID)
		}
	}
	if err == nil {
		err = n.installOwn(next)
	}
	if err != nil {
		left := own.Expires.Sub(n.now())
		wait := min(max(left/10, renewRetryMin), renewRetryMax)
		n.log.Warn("renewing this node's certificate failed; will retry", "expires", own.Expires, "retry_in", wait.String(), "err", err.Error())
		return wait
	}
	n.log.Info("certificate renewed", "certificate", next.ID, "expires", next.Expires)
	return n.renewIn()
}

// installOwn saves a new certificate of this node and makes it the one it shows.
func (n *Node) installOwn(c *authority.Certificate) error {
	if n.cfg.DataDir != "" {
		if err := fsutil.WriteFile(filepath.Join(n.cfg.DataDir, CertFile), []byte(c.Raw+"\n"), 0o600); err != nil {
			return fmt.Errorf("save the renewed certificate: %w", err)
		}
	}
	_, err := n.certs.setOwn(c.Raw, n.cfg.AgentID)
	return err
}
