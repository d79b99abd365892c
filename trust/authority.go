package trust

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

// startAuthority builds authority mode: the certificate book, the authority's books on its
// node, the node's own certificate, and the protocols it serves.
func (t *Trust) startAuthority() error {
	c := &t.cfg
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
	v := authority.NewVerifier(pub, append(t.tokenVerifierOptions(), authority.WithCertCache(c.CertCache))...)
	t.tokens = v
	crlFile := ""
	if c.DataDir != "" {
		crlFile = filepath.Join(c.DataDir, RevocationsFile)
	}
	if t.certs, err = newCertBook(v, c.Host, c.MaxAgents, crlFile, c.Allow, c.Clock, t.log.With("subsystem", "trust")); err != nil {
		return err
	}
	t.certs.onConflict = func(agentID string, bound, claimant peer.ID) {
		t.store.conflict(agentID, bound, claimant, SourceCertificate)
	}
	if c.Forget != nil {
		forget := func(cert *authority.Certificate) {
			c.Forget(cert.AgentID, cert.Peer, "its certificate "+cert.ID+" was revoked by the mesh authority")
		}
		t.certs.onRevoked.Store(&forget)
	}
	t.check = authorityChecker{certs: t.certs, store: t.store}
	if err := t.openAuthority(); err != nil {
		return err
	}
	raw, err := t.ownCertificate()
	if err != nil {
		return err
	}
	own, err := t.certs.setOwn(raw, c.AgentID)
	if err != nil {
		return fmt.Errorf("this node's agent certificate: %w (join the mesh again with `iacp-node init --join TOKEN`)", err)
	}
	t.log.Info("trust: authority", "mesh", c.Authority, "certificate", own.ID, "expires", own.Expires)
	c.Host.SetStreamHandler(CertProtocolID, c.Track(t.certs.serve))
	t.serveAuthorityProtocols()
	return nil
}

// gossipOptions are the author check, the shun of authors whose certificate would not come
// now, and this node's certificate in its heartbeats.
func (b *certBook) gossipOptions() []pubsub.Option {
	return []pubsub.Option{pubsub.WithAuthorCheck(func(ctx context.Context, c pubsub.AuthorClaim) error {
		err := b.verifyCarried(ctx, c.AgentID, c.Author, c.Via, c.Certificate)
		if protocol.CodeOf(err) == protocol.CodeIdentityInvalid {
			return fmt.Errorf("%w: %v", pubsub.ErrNotCertified, err)
		}
		return err
	}), pubsub.WithAuthorShun(b.shunned), pubsub.WithCertificate(b.ownRaw)}
}

// ownRaw returns this node's certificate, as it shows it.
func (b *certBook) ownRaw() string { return b.own.Load().Raw }

// ownCertificate returns the node's certificate: the configured one, the data directory's,
// or, on the authority's own node, a new one it issues itself (and saves).
func (t *Trust) ownCertificate() (string, error) {
	c := &t.cfg
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
	cert, err := c.MeshAuthority.Issue(authority.CertRequest{AgentID: c.AgentID, Peer: c.Host.ID(), Capabilities: c.Capabilities})
	if err == nil {
		err = t.recordIssued(cert)
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

// authorityChecker is the rules of authority mode: a peer speaks for an agent id when it holds
// a valid certificate for it, and is its holder (certBook), and, with an allowlist, the
// allowlist names the pair.
type authorityChecker struct {
	certs *certBook
	store *trustStore
}

func (authorityChecker) mode() string { return Authority }

func (a authorityChecker) claim(ctx context.Context, agentID string, p peer.ID, source string) error {
	if err := a.certs.verify(ctx, agentID, p, ""); err != nil {
		return err
	}
	if a.store.allowlist != nil {
		return a.store.check(agentID, p, source)
	}
	return nil
}

func (a authorityChecker) recipient(ctx context.Context, agentID string, p peer.ID) error {
	return a.certs.verifyRecipient(ctx, agentID, p)
}

// bind: in authority mode the certificate is the binding.
func (authorityChecker) bind(string, peer.ID) {}

func (authorityChecker) peerOf(string) (peer.ID, bool) { return "", false }

// heard: gossip took the heartbeat only with a verified certificate for its author.
func (a authorityChecker) heard(agentID string, p peer.ID) (bool, error) {
	if err := a.certs.check(agentID, p); err != nil {
		return false, err
	}
	return true, nil
}

// grants: the permissions of the certificate Claim verified.
func (a authorityChecker) grants(p peer.ID) []string {
	if c, ok := a.certs.byPeer.Peek(p); ok {
		return c.Permissions
	}
	return nil
}
