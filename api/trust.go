package api

import (
	"net/http"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// getTrust lists who may speak for which agent id, and the claims that contradicted it.
func (s *Server) getTrust(w http.ResponseWriter, r *http.Request) {
	conflicts, total, _ := s.n.TrustConflicts(0)
	if conflicts == nil {
		conflicts = []node.TrustConflict{}
	}
	write(w, r, http.StatusOK, TrustDoc{Mode: s.n.TrustMode(), Pins: s.n.TrustPins(), Conflicts: conflicts, ConflictsTotal: total})
}

// forgetTrust forgets the pin of one agent id, or every pin of one peer.
func (s *Server) forgetTrust(w http.ResponseWriter, r *http.Request) {
	var req ForgetRequest
	if !s.readInto(w, r, &req) {
		return
	}
	var p peer.ID
	var err error
	switch {
	case (req.AgentID == "") == (req.PeerID == ""):
		err = errorf(protocol.CodePayloadInvalid, "name one of agent_id (forget its pin) or peer_id (forget every pin of that peer)")
	case req.AgentID != "":
		err = protocol.ValidateAgentID(req.AgentID)
	default:
		if p, err = peer.Decode(req.PeerID); err != nil {
			err = errorf(protocol.CodePayloadInvalid, "peer_id %q: %v", req.PeerID, err)
		}
	}
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	write(w, r, http.StatusOK, ForgetResult{Forgotten: s.n.ForgetTrust(req.AgentID, p)})
}

// invite issues a one-time invitation to the mesh (the mesh authority's node only).
func (s *Server) invite(w http.ResponseWriter, r *http.Request) {
	var req InviteRequest
	if !s.readInto(w, r, &req) {
		return
	}
	var ttl time.Duration
	if req.TTL != "" {
		var err error
		if ttl, err = time.ParseDuration(req.TTL); err != nil || ttl <= 0 {
			s.fail(w, r, errorf(protocol.CodePayloadInvalid, "ttl %q: want a positive duration such as 24h", req.TTL), "")
			return
		}
	}
	token, expires, err := s.n.Invite(authority.InviteTerms{AgentID: req.AgentID, TTL: ttl, Grants: req.Grants, Replace: req.Replace})
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	write(w, r, http.StatusOK, InviteDoc{Token: token, AgentID: req.AgentID, Grants: req.Grants, AnyAgent: req.AgentID == "",
		Replace: req.Replace, Expires: expires.UTC()})
}

// revoke revokes certificates and broadcasts the revocation list (the mesh authority's node
// only).
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	var req RevokeRequest
	if !s.readInto(w, r, &req) {
		return
	}
	if req.Target == "" {
		s.fail(w, r, errorf(protocol.CodePayloadInvalid, "target: name an agent id (all its certificates) or a certificate id"), "")
		return
	}
	revoked, err := s.n.Revoke(r.Context(), req.Target, node.RevokeOptions{DryRun: req.DryRun, AllPeers: req.AllPeers})
	if err != nil && len(revoked) == 0 {
		s.fail(w, r, err, "")
		return
	}
	write(w, r, http.StatusOK, CertificatesDoc{Certificates: revoked})
}

// certificates lists the certificates the mesh authority issued (its node only).
func (s *Server) certificates(w http.ResponseWriter, r *http.Request) {
	cs, err := s.n.Certificates()
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	write(w, r, http.StatusOK, CertificatesDoc{Certificates: cs})
}

// authToken obtains an A2ACP token for this node's agent from the mesh authority: the A2ACP
// draft's POST /auth/token.
func (s *Server) authToken(w http.ResponseWriter, r *http.Request) {
	var req node.TokenRequest
	if !s.readInto(w, r, &req) {
		return
	}
	tok, err := s.n.Token(r.Context(), req)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	write(w, r, http.StatusOK, TokenDoc{Token: tok.Raw, ExpiresAt: tok.Expires.UTC()})
}
