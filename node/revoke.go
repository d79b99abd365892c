package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
)

// RegistryFile holds, on the mesh authority's node, the certificates it issued and revoked
// (authority.Registry).
const RegistryFile = "certificates.json"

// RevocationsEvent is the event type of the broadcast that carries a new revocation list:
// its data is {"crl": "<compact JWS>"}. The list is signed by the mesh authority, so whoever
// relays it, a node applies it only when the signature verifies and its seq is higher.
const RevocationsEvent = "iacp.trust.revocations"

// revocationSyncEvery is how often a node in authority mode asks a few connected peers
// (revocationSyncPeers) whether they hold a newer revocation list: a node that missed the
// broadcast (down, partitioned, kept from it by peers that withhold gossip, or not yet holding
// the authority node's certificate) catches up within this, at the cost of a few small
// exchanges per interval, whatever the size of the mesh.
const revocationSyncEvery = time.Minute

// revocationSyncPeers is how many peers each sync asks: the authority's node when connected,
// and certified peers.
const revocationSyncPeers = 3

// IssuedCertificate is a certificate the mesh authority issued, as its registry keeps it.
type IssuedCertificate = authority.Issued

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
func (n *Node) Revoke(ctx context.Context, target string, o RevokeOptions) ([]IssuedCertificate, error) {
	if n.registry == nil {
		return nil, protocol.Errorf(protocol.CodePermissionDenied, "this node is not the mesh authority (it holds no %s in a data directory): revoke on the node that founded the mesh", AuthorityKeyFile)
	}
	named := n.registry.Matching(target)
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
	crl, revoked, err := n.registry.Revoke(n.cfg.MeshAuthority, target)
	if err != nil {
		return nil, err
	}
	if err := n.certs.applyRevocations(crl); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternalError, "the revocation list just signed does not verify: %v", err)
	}
	for _, c := range revoked {
		n.log.Warn("certificate revoked", "agent", c.AgentID, "peer", c.Peer, "certificate", c.ID)
	}
	if err := n.broadcastRevocations(ctx, crl); err != nil {
		return revoked, protocol.Errorf(protocol.CodeInternalError, "revoked, but the broadcast failed (peers catch up within %v): %v", revocationSyncEvery, err)
	}
	return revoked, nil
}

// holderPeers returns the peers that the unrevoked certificates among cs are held on.
func holderPeers(cs []IssuedCertificate) map[peer.ID]bool {
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
func (n *Node) broadcastRevocations(ctx context.Context, crl string) error {
	if n.gossip == nil {
		return nil
	}
	_, err := n.gossip.Broadcast(ctx, protocol.EventPayload{EventType: RevocationsEvent, Severity: protocol.SeverityWarning,
		Detail: "the mesh authority revoked certificates", Data: map[string]string{"crl": crl}})
	return err
}

// Certificates returns the unexpired certificates the mesh authority issued, revoked or not;
// only the mesh authority's node has them.
func (n *Node) Certificates() ([]IssuedCertificate, error) {
	if n.registry == nil {
		return nil, protocol.Errorf(protocol.CodePermissionDenied, "this node is not the mesh authority: list certificates on the node that founded the mesh")
	}
	return n.registry.List(), nil
}

// RevocationSeq returns the seq of the mesh's revocation list this node holds and applies: 0
// before the first list, and in open or allowlist mode. A node whose seq equals the
// authority's has every revocation the authority made.
func (n *Node) RevocationSeq() uint64 {
	if n.certs == nil {
		return 0
	}
	return n.certs.v.RevocationSeq()
}

// heardRevocations applies the revocation list an event carries. Anyone may relay one; the
// list's own signature decides.
func (n *Node) heardRevocations(it *pubsub.Item) {
	if n.certs == nil || it.Event.EventType != RevocationsEvent {
		return
	}
	data, _ := it.Event.Data.(map[string]any)
	crl, _ := data["crl"].(string)
	if crl == "" {
		return
	}
	if err := n.certs.applyRevocations(crl); err != nil {
		// at debug: whoever sends a bad list is charged by gossip, not by our log
		n.log.Debug("revocation list in an event refused", "from", it.Author, "err", err.Error())
	}
}

// syncRevocations asks up to revocationSyncPeers connected peers, at once, for a newer
// revocation list than the node holds: the mesh authority's node when it is connected, then
// peers whose certificates the node verified, at random. Any peer could answer slowly or never
// to keep a list from the node, and a peer without a certificate costs nothing to make; a
// certified peer is one the authority vouched for, and several asked at once are each within
// certTimeout.
func (n *Node) syncRevocations(r *rand.Rand) {
	var ask []peer.ID
	if p, err := peer.Decode(n.cfg.AuthorityNode); err == nil && p != n.host.ID() && n.host.Network().Connectedness(p) == network.Connected {
		ask = append(ask, p)
	}
	peers := n.host.Network().Peers()
	r.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
	for _, p := range peers {
		if len(ask) == revocationSyncPeers {
			break
		}
		if c, ok := n.certs.byPeer.Peek(p); ok && p != n.host.ID() && !slices.Contains(ask, p) && n.certs.stands(c) {
			ask = append(ask, p)
		}
	}
	ctx, cancel := context.WithTimeout(n.ctx, certTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range ask {
		wg.Go(func() {
			ans, err := n.certs.ask(ctx, p, p)
			if err == nil && ans.CRL != "" {
				if err := n.certs.applyRevocations(ans.CRL); err != nil {
					n.log.Warn("revocation list refused", "from", p, "err", err.Error())
				}
			}
		})
	}
	wg.Wait()
}

// keepTrust is the authority mode's upkeep: the revocation-list sync and the renewal of the
// node's own certificate.
func (n *Node) keepTrust() {
	defer n.wg.Done()
	seed := uint64(time.Now().UnixNano())
	if n.cfg.Seed != 0 {
		seed = n.cfg.Seed // a simulated run repeats the sync's draws
	}
	r := rand.New(rand.NewPCG(seed, 6))
	every := n.cfg.revocationSync
	if every <= 0 {
		every = revocationSyncEvery
	}
	sync := time.NewTicker(every)
	defer sync.Stop()
	renew := time.NewTimer(n.renewIn())
	defer renew.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-sync.C:
			n.syncRevocations(r)
		case <-renew.C:
			renew.Reset(n.renewOwn())
		}
	}
}
