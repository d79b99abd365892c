package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/discovery"
	"github.com/iacp-node/iacp-node/internal/fsutil"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
)

// Files of authority mode inside the data directory.
const (
	// CertFile holds the node's agent certificate (a compact JWS).
	CertFile = "agent.cert"
	// AuthorityKeyFile holds the mesh authority's key on the node that founded the mesh.
	AuthorityKeyFile = "authority.key"
	// RevocationsFile holds the newest revocation list the node applied.
	RevocationsFile = "revocations.jwt"
)

// setupTrust chooses the trust mode and, in authority mode, builds the certificate book and
// installs the node's own certificate. It runs in New before the mesh starts.
func (n *Node) setupTrust() error {
	c := &n.cfg
	if c.MeshAuthority == nil && c.DataDir != "" {
		a, err := authority.Load(filepath.Join(c.DataDir, AuthorityKeyFile))
		switch {
		case err == nil:
			c.MeshAuthority = a
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("mesh authority: %w", err)
		}
	}
	if c.MeshAuthority != nil && c.Authority == "" {
		c.Authority = c.MeshAuthority.ID()
	}
	if c.Trust == "" {
		c.Trust = TrustOpen
		if c.Authority != "" {
			c.Trust = TrustAuthority
		}
	}
	if c.Trust == TrustOpen {
		if len(c.TokenIssuers) > 0 {
			n.tokens = authority.NewVerifier(nil, n.tokenVerifierOptions()...)
		}
		n.log.Warn("trust: open: any peer may claim an agent id nobody claimed before (trust on first use); for labs only, see docs/trust.md")
		return nil
	}
	if c.Authority == "" {
		return errors.New("trust: authority needs the mesh authority's id (authority in the config): found a mesh with `iacp-node init`, join one with `iacp-node init --join TOKEN`, or set trust: open for a lab")
	}
	id, err := peer.Decode(c.Authority)
	if err != nil {
		return fmt.Errorf("authority %q: not a mesh id: %w", c.Authority, err)
	}
	pub, err := id.ExtractPublicKey()
	if err != nil {
		return fmt.Errorf("authority %q: no public key in the mesh id: %w", c.Authority, err)
	}
	if c.MeshAuthority != nil && c.MeshAuthority.ID() != c.Authority {
		return fmt.Errorf("authority %s is not the mesh whose key this node holds (%s)", c.Authority, c.MeshAuthority.ID())
	}
	v := authority.NewVerifier(pub, n.tokenVerifierOptions()...)
	n.tokens = v
	crlFile := ""
	if c.DataDir != "" {
		crlFile = filepath.Join(c.DataDir, RevocationsFile)
	}
	allow := func(p peer.ID) error { return n.rate.allow(p, n.now()) }
	certs, err := newCertBook(v, n.host, c.MaxAgents, crlFile, allow, c.Clock, n.log.With("subsystem", "trust"))
	if err != nil {
		return err
	}
	certs.onConflict = func(agentID string, bound, claimant peer.ID) {
		n.trust.conflict(agentID, bound, claimant, claimCertificate)
	}
	n.certs = certs
	if err := n.openAuthority(); err != nil {
		return err
	}
	raw, err := n.ownCertificate()
	if err != nil {
		return err
	}
	own, err := certs.setOwn(raw, c.AgentID)
	if err != nil {
		return fmt.Errorf("this node's agent certificate: %w (join the mesh again with `iacp-node init --join TOKEN`)", err)
	}
	n.log.Info("trust: authority", "mesh", c.Authority, "certificate", own.ID, "expires", own.Expires)
	c.DiscoveryOptions = append(c.DiscoveryOptions,
		discovery.WithCertCheck(certs.checkRaw),
		discovery.WithCertificate(func() string { return certs.own.Load().Raw }))
	c.GossipOptions = append(c.GossipOptions, pubsub.WithAuthorCheck(func(ctx context.Context, c pubsub.AuthorClaim) error {
		err := certs.verifyCarried(ctx, c.AgentID, c.Author, c.Via, c.Certificate)
		if protocol.CodeOf(err) == protocol.CodeIdentityInvalid {
			return fmt.Errorf("%w: %v", pubsub.ErrNotCertified, err)
		}
		return err
	}), pubsub.WithAuthorShun(certs.shunned), pubsub.WithCertificate(func() string { return certs.own.Load().Raw }))
	n.host.SetStreamHandler(CertProtocolID, n.tracked(certs.serve))
	n.serveAuthorityProtocols()
	return nil
}

// ownCertificate returns the node's certificate: the configured one, the data directory's,
// or, on the authority's own node, a new one it issues itself (and saves).
func (n *Node) ownCertificate() (string, error) {
	c := &n.cfg
	if c.Certificate != "" {
		return c.Certificate, nil
	}
	file := ""
	if c.DataDir != "" {
		file = filepath.Join(c.DataDir, CertFile)
		raw, err := os.ReadFile(file)
		if err == nil {
			return strings.TrimSpace(string(raw)), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("agent certificate: %w", err)
		}
	}
	if c.MeshAuthority == nil {
		return "", fmt.Errorf("no agent certificate (%s): join the mesh with `iacp-node init --join TOKEN`, or set trust: open for a lab", orMemory(file))
	}
	cert, err := c.MeshAuthority.Issue(authority.CertRequest{AgentID: c.AgentID, Peer: n.host.ID(), Capabilities: capabilities(c.Manifest)})
	if err == nil {
		err = n.recordIssued(cert)
	}
	if err != nil {
		return "", fmt.Errorf("issue this node's own certificate: %w", err)
	}
	if file != "" {
		if err := fsutil.WriteFile(file, []byte(cert.Raw+"\n"), 0o600); err != nil {
			return "", fmt.Errorf("save this node's certificate: %w", err)
		}
	}
	return cert.Raw, nil
}

func orMemory(file string) string {
	if file == "" {
		return "no data directory"
	}
	return file
}

// checkClaim returns nil when p may speak for agentID: in authority mode p holds a valid
// certificate for it (fetched from p when the node has none yet) and, with an allowlist, the
// allowlist names the pair; otherwise the trust-on-first-use pins and the allowlist decide.
func (n *Node) checkClaim(ctx context.Context, agentID string, p peer.ID, source string) error {
	if n.certs == nil {
		return n.trust.check(agentID, p, source)
	}
	if p == n.host.ID() {
		return nil
	}
	if err := n.certs.verify(ctx, agentID, p, ""); err != nil {
		return err
	}
	if n.trust.allowlist != nil {
		return n.trust.check(agentID, p, source)
	}
	return nil
}
