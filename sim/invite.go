package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// joinTimeout bounds one join by invitation, dial included: generous, because hundreds of
// nodes joining at once through the authority's node keep the machine's cores busy, and a
// join that gives up stops the run (at 90 s, seven joiners of a 500-node mesh gave up on a
// 2-core machine whose timers ran two seconds late).
const joinTimeout = 5 * time.Minute

// invite asks node 0, the mesh authority's node, for a one-time invitation bound to agentID,
// as `iacp-node invite --agent` does; who names the joiner in errors ("node 3").
func (c *cluster) invite(who, agentID string) (*authority.Invite, error) {
	authNode := c.node(0)
	if authNode == nil {
		return nil, fmt.Errorf("%s joins by invitation from node 0, the mesh authority's node, which is not running: start node 0 first (or use trust: open)", who)
	}
	token, _, err := authNode.Invite(authority.InviteTerms{AgentID: agentID, TTL: time.Hour})
	if err != nil {
		return nil, fmt.Errorf("%s: invitation: %w", who, err)
	}
	inv, err := authority.DecodeInvite(token)
	if err != nil {
		return nil, fmt.Errorf("%s: invitation: %w", who, err)
	}
	return &inv, nil
}

// redeem redeems inv over h, the host the joiner will run on (node.Join, the exchange of
// `iacp-node init --join`), and returns the certificate. It gives up at joinTimeout or when
// ctx ends (the run cancelled).
func redeem(ctx context.Context, who string, h host.Host, inv authority.Invite, agentID string, caps []string) (*authority.Certificate, error) {
	ctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	for {
		cert, err := node.Join(ctx, h, inv, agentID, caps)
		var refused *protocol.Error
		if err == nil {
			return cert, nil
		}
		// The authority's answer is final; a node that did not answer in time (the machine's
		// cores busy with hundreds of joins) is asked again until joinTimeout.
		if errors.As(err, &refused) || ctx.Err() != nil {
			return nil, fmt.Errorf("%s: join by invitation: %w", who, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: join by invitation: %w", who, err)
		case <-time.After(time.Second):
		}
	}
}

// join redeems inv for sn over h and keeps the certificate.
func (c *cluster) join(ctx context.Context, sn *simNode, h host.Host, inv authority.Invite) error {
	cert, err := redeem(ctx, fmt.Sprintf("node %d", sn.idx), h, inv, sn.agentID, certCapabilities(sn.manifest))
	if err != nil {
		return err
	}
	sn.cert = cert.Raw
	c.invited.Add(1)
	return nil
}

// joinLoopback joins from a short-lived host with the node's key on 127.0.0.1, as
// `iacp-node init --join` does before the node ever runs.
func (c *cluster) joinLoopback(ctx context.Context, sn *simNode, inv authority.Invite) error {
	cert, err := redeemLoopback(ctx, fmt.Sprintf("node %d", sn.idx), sn.key, inv, sn.agentID, certCapabilities(sn.manifest))
	if err != nil {
		return err
	}
	sn.cert = cert.Raw
	c.invited.Add(1)
	return nil
}

// redeemLoopback redeems inv from a short-lived host with key that dials out only.
func redeemLoopback(ctx context.Context, who string, key crypto.PrivKey, inv authority.Invite, agentID string, caps []string) (*authority.Certificate, error) {
	h, err := libp2p.New(libp2p.Identity(key), libp2p.NoListenAddrs)
	if err != nil {
		return nil, fmt.Errorf("%s: join by invitation: %w", who, err)
	}
	defer h.Close()
	return redeem(ctx, who, h, inv, agentID, caps)
}

// certCapabilities lists a manifest's capabilities as node 0 certifies its own: the names of
// its tools, models and domains.
func certCapabilities(m protocol.Manifest) []string {
	out := append([]string(nil), m.Tools...)
	out = append(out, m.Models...)
	return append(out, m.Domains...)
}
