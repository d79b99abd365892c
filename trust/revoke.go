package trust

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/protocol"
)

// RegistryFile holds, on the mesh authority's node, the certificates it issued and revoked
// (authority.Registry).
const RegistryFile = "certificates.json"

// RevocationsEvent is the event type of the broadcast that carries a new revocation list:
// its data is {"crl": "<compact JWS>"}. The list is signed by the mesh authority, so whoever
// relays it, a node applies it only when the signature verifies and its seq is higher.
const RevocationsEvent = "iacp.trust.revocations"

// revocationSyncPeers is how many peers each sync asks: the authority's node when connected,
// and certified peers.
const revocationSyncPeers = 3

// RevokeOptions are how Revoke treats what its target names.
type RevokeOptions struct {
	// DryRun returns the certificates the revocation would revoke, and revokes nothing.
	DryRun bool
	// AllPeers revokes an agent id's certificates even when they are held on more than one
	// peer (two certified holders of one id, a conflict). Without it such a revocation is
	// refused, naming each certificate, so that the operator revokes the wrong holder alone,
	// by certificate id.
	AllPeers bool
}

// Revoke revokes the certificates that target names, an agent id (all of its certificates)
// or a certificate id, and broadcasts the new revocation list, which this node applies at
// once. From then on no node that holds the list believes the revoked certificates: their
// messages, heartbeats and DHT records are refused with IDENTITY_INVALID. Only the mesh
// authority's node can revoke. It returns the certificates revoked (with o.DryRun, those it
// would revoke); a failed broadcast is reported with them (peers still catch up within a
// minute).
func (t *Trust) Revoke(ctx context.Context, target string, o RevokeOptions) ([]authority.Issued, error) {
	if t.reg == nil {
		return nil, protocol.Errorf(protocol.CodePermissionDenied, "this node is not the mesh authority (it holds no %s in a data directory): revoke on the node that founded the mesh", AuthorityKeyFile)
	}
	named := t.reg.Matching(target)
	if peers := holderPeers(named); len(peers) > 1 && !o.AllPeers && !o.DryRun {
		var each []string
		for _, c := range named {
			if c.Revoked.IsZero() {
				each = append(each, fmt.Sprintf("%s on %s", c.ID, c.Peer))
			}
		}
		return nil, protocol.Errorf(protocol.CodePermissionDenied, "agent %s has certificates on %d peers (%s): revoke the wrong holder by certificate id, or all of them with --all-peers", target, len(peers), strings.Join(each, "; "))
	}
	if o.DryRun {
		if len(named) == 0 {
			return nil, protocol.Errorf(protocol.CodeAgentNotFound, "revoke %s: %v (see the certificates with iacp-node trust certs)", target, authority.ErrNothingToRevoke)
		}
		return named, nil
	}
	crl, revoked, err := t.reg.Revoke(t.cfg.MeshAuthority, target)
	if err != nil {
		return nil, err
	}
	if err := t.certs.applyRevocations(crl); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternalError, "the revocation list just signed does not verify: %v", err)
	}
	for _, c := range revoked {
		t.log.Warn("certificate revoked", "agent", c.AgentID, "peer", c.Peer, "certificate", c.ID)
	}
	if err := t.broadcastRevocations(ctx, crl); err != nil {
		return revoked, protocol.Errorf(protocol.CodeInternalError, "revoked, but the broadcast failed (peers catch up within %v): %v", t.cfg.RevocationSync, err)
	}
	return revoked, nil
}

// holderPeers returns the peers that the unrevoked certificates among cs are held on.
func holderPeers(cs []authority.Issued) map[peer.ID]bool {
	out := map[peer.ID]bool{}
	for _, c := range cs {
		if c.Revoked.IsZero() {
			out[c.Peer] = true
		}
	}
	return out
}

// broadcastRevocations broadcasts crl, a list the mesh authority just signed and this node
// applied, to the mesh.
func (t *Trust) broadcastRevocations(ctx context.Context, crl string) error {
	if t.cfg.Publish == nil {
		return nil
	}
	return t.cfg.Publish(ctx, protocol.EventPayload{EventType: RevocationsEvent, Severity: protocol.SeverityWarning,
		Detail: "the mesh authority revoked certificates", Data: map[string]string{"crl": crl}})
}

// Certificates returns the unexpired certificates the mesh authority issued, revoked or not;
// only the mesh authority's node has them.
func (t *Trust) Certificates() ([]authority.Issued, error) {
	if t.reg == nil {
		return nil, protocol.Errorf(protocol.CodePermissionDenied, "this node is not the mesh authority: list certificates on the node that founded the mesh")
	}
	return t.reg.List(), nil
}

// RevocationSeq returns the seq of the mesh's revocation list this node holds and applies: 0
// before the first list, and in open or allowlist mode. A node whose seq equals the
// authority's has every revocation the authority made.
func (t *Trust) RevocationSeq() uint64 {
	if t.certs == nil {
		return 0
	}
	return t.certs.v.RevocationSeq()
}

// syncRevocations asks up to revocationSyncPeers connected peers, at once, for a newer
// revocation list than the node holds: the mesh authority's node when it is connected, then
// peers whose certificates the node verified, at random. Any peer could answer slowly or never
// to keep a list from the node, and a peer without a certificate costs nothing to make; a
// certified peer is one the authority vouched for, and several asked at once are each within
// certTimeout.
func (t *Trust) syncRevocations(r *rand.Rand) {
	var ask []peer.ID
	if p, err := peer.Decode(t.cfg.AuthorityNode); err == nil && p != t.cfg.Host.ID() && t.cfg.Host.Network().Connectedness(p) == network.Connected {
		ask = append(ask, p)
	}
	peers := t.cfg.Host.Network().Peers()
	r.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
	for _, p := range peers {
		if len(ask) == revocationSyncPeers {
			break
		}
		if c, ok := t.certs.byPeer.Peek(p); ok && p != t.cfg.Host.ID() && !slices.Contains(ask, p) && t.certs.stands(c) {
			ask = append(ask, p)
		}
	}
	ctx, cancel := context.WithTimeout(t.ctx, certTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range ask {
		wg.Go(func() {
			ans, err := t.certs.ask(ctx, p, p)
			if err == nil && ans.CRL != "" {
				if err := t.certs.applyRevocations(ans.CRL); err != nil {
					t.log.Warn("revocation list refused", "from", p, "err", err.Error())
				}
			}
		})
	}
	wg.Wait()
}
