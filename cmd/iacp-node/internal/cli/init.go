package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/identity"
	"github.com/iacp-node/iacp-node/internal/fsutil"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

func init() { register(newInitCmd) }

// initFlags are init's flags.
type initFlags struct {
	dataDir, agentID, joinToken string
	caps                        []string
	force, found, open          bool
}

func newInitCmd() *cobra.Command {
	var f initFlags
	cmd := &cobra.Command{
		Use:   "init [--found | --join TOKEN | --open]",
		Short: "Create a data directory: identity key, config with every default, API token; found or join a mesh",
		Long: `init creates the data directory (mode 0700) with an Ed25519 identity key (mode 0600), a
config.yaml with every setting written out at its default and commented, and the local API's
bearer token (mode 0600). It never overwrites a key; --force rewrites the config.

Without --agent-id the agent id is local:<hostname>:agent-<end of the peer id>.

Trust (docs/trust.md): by default init founds a mesh. Choose at most one of:
  (none), --found  found a mesh: create the mesh authority's key (authority.key, mode 0600)
                   in the data directory; the config gets trust: authority and the mesh id.
                   The node certifies itself at its first start and invites others with
                   iacp-node invite. Keep authority.key as secret as the identity key.
  --join TOKEN     join a mesh: prove the invitation's secret to the authority's node (which
                   must be running), save the agent certificate (agent.cert), and write the
                   mesh's authority and bootstrap addresses into the config. An invitation
                   bound to an agent id sets --agent-id.
  --open           a lab node: trust: open (trust on first use). Any peer may claim an agent
                   id nobody claimed before; the node warns at every start.
With --force and no trust flag, a node that joined a mesh stays in it (its authority, the
authority's node, bootstrap addresses and, without --agent-id, the agent id its certificate
names are kept), a founder keeps its authority.key, and any other node founds a mesh as a
new one does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags()); err != nil {
				return err
			}
			return runInit(cmd, &f)
		},
	}
	dataDirFlag(cmd, &f.dataDir)
	cmd.Flags().StringVar(&f.agentID, "agent-id", "", "agent id, namespace:host:name (env IACP_AGENT_ID)")
	cmd.Flags().StringSliceVar(&f.caps, "capabilities", nil, "capabilities, kind:name, e.g. tool:terminal,model:llama3,domain:security; a bare name is a tool (env IACP_CAPABILITIES)")
	cmd.Flags().BoolVar(&f.force, "force", false, "rewrite an existing config.yaml")
	cmd.Flags().BoolVar(&f.found, "found", false, "found a mesh (the default): create the mesh authority's key in the data directory")
	cmd.Flags().StringVar(&f.joinToken, "join", "", "join a mesh with an invitation from iacp-node invite")
	cmd.Flags().BoolVar(&f.open, "open", false, "run open (trust on first use), for labs: no mesh authority")
	return cmd
}

// runInit creates the data directory, its key and config, and founds or joins a mesh.
func runInit(cmd *cobra.Command, f *initFlags) error {
	if err := trustFlagsConflict(f.found, f.open, f.joinToken != ""); err != nil {
		return err
	}
	inv, err := decodeJoin(f)
	if err != nil {
		return err
	}
	dataDir := f.dataDir
	path := filepath.Join(dataDir, ConfigFile)
	old, exists, err := loadConfig(path)
	if exists && !f.force {
		return fmt.Errorf("%s exists; use --force to rewrite it", path)
	}
	if err != nil && !f.force {
		return fmt.Errorf("%w; use --force to rewrite it", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	key, created, err := identity.LoadOrCreate(filepath.Join(dataDir, node.KeyFile))
	if err != nil {
		return err
	}
	pid := identity.PeerID(key).String()
	keep := !f.found && !f.open && f.joinToken == "" && exists && joined(dataDir, old)
	agentID, err := initAgentID(f, pid, keep, old)
	if err != nil {
		return err
	}
	cfg := node.DefaultConfig()
	cfg.DataDir = dataDir
	cfg.AgentID = agentID
	if err := parseCapabilities(f.caps, &cfg.Manifest); err != nil {
		return err
	}
	trustLine, founder, err := initTrust(cmd.Context(), f, key, inv, old, keep, &cfg)
	if err != nil {
		return err
	}
	if err := writeConfig(path, cfg); err != nil {
		return err
	}
	if err := initHooks(dataDir); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	verb := "reusing"
	if created {
		verb = "created"
	}
	fmt.Fprintf(out, "data dir  %s\npeer id   %s (%s key)\nagent id  %s\ncapabilities %s\ntrust     %s\nconfig    %s\n",
		dataDir, pid, verb, agentID, capabilityList(cfg.Manifest), trustLine, path)
	fmt.Fprintf(out, "start it: iacp-node run --data-dir %s\n", dataDir)
	if founder {
		fmt.Fprintf(out, "then invite each other agent: iacp-node invite --data-dir %s [--agent ID]\n", dataDir)
	}
	return nil
}

// decodeJoin decodes the invitation of --join, if any; its agent id is the default of
// --agent-id.
func decodeJoin(f *initFlags) (authority.Invite, error) {
	if f.joinToken == "" {
		return authority.Invite{}, nil
	}
	inv, err := authority.DecodeInvite(strings.TrimSpace(f.joinToken))
	if err != nil {
		return inv, fmt.Errorf("--join: %w (pass the whole token that iacp-node invite printed)", err)
	}
	if f.agentID == "" {
		f.agentID = inv.AgentID
	}
	return inv, nil
}

// initAgentID is the agent id init writes: --agent-id, else the one of the old config when
// its trust is kept (the certificate names it), else one made from the peer id pid.
func initAgentID(f *initFlags, pid string, keep bool, old node.Config) (string, error) {
	agentID := f.agentID
	if keep && agentID == "" {
		agentID = old.AgentID
	}
	if agentID == "" {
		agentID = defaultAgentID(pid)
	}
	if err := protocol.ValidateAgentID(agentID); err != nil {
		return "", fmt.Errorf("--agent-id: %w", err)
	}
	return agentID, nil
}

// initTrust sets cfg's trust as f chose: open, joined by invitation, kept from the old config
// (keep), or founded here. It returns the line init prints and whether this node founded.
func initTrust(ctx context.Context, f *initFlags, key crypto.PrivKey, inv authority.Invite, old node.Config, keep bool, cfg *node.Config) (line string, founder bool, err error) {
	dataDir, agentID := f.dataDir, cfg.AgentID
	switch {
	case f.open:
		cfg.Trust = node.TrustOpen
		return "open (trust on first use, for labs: any peer may claim an agent id nobody claimed before)", false, nil
	case f.joinToken != "":
		if _, err := os.Stat(filepath.Join(dataDir, node.AuthorityKeyFile)); err == nil {
			return "", false, fmt.Errorf("%s holds %s: this node founded a mesh and cannot join another; use another --data-dir", dataDir, node.AuthorityKeyFile)
		}
		cert, err := joinMesh(ctx, key, inv, agentID, f.caps)
		if err != nil {
			return "", false, err
		}
		if err := fsutil.WriteFile(filepath.Join(dataDir, node.CertFile), []byte(cert.Raw+"\n"), 0o600); err != nil {
			return "", false, err
		}
		cfg.Trust, cfg.Authority, cfg.Bootstrap = node.TrustAuthority, inv.Authority, inv.Addrs
		cfg.AuthorityNode = authorityNodeOf(inv)
		return fmt.Sprintf("authority %s (joined: certificate %s, expires %s)", inv.Authority, cert.ID, cert.Expires.Format(time.RFC3339)), false, nil
	case keep:
		if err := checkCertificate(dataDir, old.Authority, identity.PeerID(key), agentID); err != nil {
			return "", false, err
		}
		cfg.Trust, cfg.Authority, cfg.Bootstrap = node.TrustAuthority, old.Authority, old.Bootstrap
		cfg.AuthorityNode = old.AuthorityNode
		return "authority " + old.Authority + " (kept: this node joined that mesh; its certificate is " + node.CertFile + ")", false, nil
	default:
		a, err := foundMesh(dataDir, identity.PeerID(key), agentID)
		if err != nil {
			return "", false, err
		}
		cfg.Trust, cfg.Authority = node.TrustAuthority, a.ID()
		return "authority " + a.ID() + " (founded here: the node certifies itself at its first start)", true, nil
	}
}

// trustFlagsConflict refuses more than one of --found, --open and --join.
func trustFlagsConflict(found, open, join bool) error {
	var set []string
	for _, f := range []struct {
		on   bool
		name string
	}{{found, "--found"}, {join, "--join"}, {open, "--open"}} {
		if f.on {
			set = append(set, f.name)
		}
	}
	if len(set) < 2 {
		return nil
	}
	return fmt.Errorf("%s: choose one: found a mesh (the default, or --found), join one (--join TOKEN), or run open for a lab (--open)",
		strings.Join(set, " and "))
}

// checkCertificate verifies the certificate in dataDir for agentID on self under the mesh
// meshID, saying what to do when it does not hold.
func checkCertificate(dataDir, meshID string, self peer.ID, agentID string) error {
	file := filepath.Join(dataDir, node.CertFile)
	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("agent certificate: %w", err)
	}
	id, err := peer.Decode(meshID)
	if err != nil {
		return fmt.Errorf("authority %q in the config: not a mesh id: %w", meshID, err)
	}
	pub, err := id.ExtractPublicKey()
	if err != nil {
		return fmt.Errorf("authority %q in the config: %w", meshID, err)
	}
	if _, err := authority.NewVerifier(pub).Certificate(strings.TrimSpace(string(raw)), self, agentID); err != nil {
		return fmt.Errorf("%s: %w (keep the agent id the certificate names, or join again with an invitation for the new one)", file, err)
	}
	return nil
}

// joined reports whether the data directory belongs to a mesh it joined: its config names an
// authority, it holds that mesh's certificate and not the authority's key.
func joined(dataDir string, c node.Config) bool {
	if c.Authority == "" || c.Trust == node.TrustOpen {
		return false
	}
	if _, err := os.Stat(filepath.Join(dataDir, node.AuthorityKeyFile)); err == nil {
		return false
	}
	_, err := os.Stat(filepath.Join(dataDir, node.CertFile))
	return err == nil
}

// initHooks are extra steps of init registered by other files (the API token).
var initHookFuncs []func(dataDir string) error

func initHooks(dataDir string) error {
	for _, h := range initHookFuncs {
		if err := h(dataDir); err != nil {
			return err
		}
	}
	return nil
}

// foundMesh creates the mesh authority's key in dataDir, or reuses the one there. A
// certificate in dataDir that the authority did not issue to this peer and agent (one of a
// mesh the node joined, or for the agent id it had) is not kept: with a new key, init refuses,
// since founding would leave that mesh; with the founder's own key, the certificate goes and
// the node certifies itself again at its next start.
func foundMesh(dataDir string, self peer.ID, agentID string) (*authority.Authority, error) {
	path := filepath.Join(dataDir, node.AuthorityKeyFile)
	certFile := filepath.Join(dataDir, node.CertFile)
	raw, certErr := os.ReadFile(certFile)
	if certErr != nil && !errors.Is(certErr, fs.ErrNotExist) {
		return nil, fmt.Errorf("agent certificate: %w", certErr)
	}
	a, err := authority.Load(path)
	switch {
	case err == nil:
		if certErr == nil {
			v := authority.NewVerifier(a.PublicKey())
			if _, err := v.Certificate(strings.TrimSpace(string(raw)), self, agentID); err != nil {
				if err := os.Remove(certFile); err != nil {
					return nil, fmt.Errorf("agent certificate: %w", err)
				}
			}
		}
		return a, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("mesh authority: %w", err)
	case certErr == nil:
		return nil, fmt.Errorf("%s holds the certificate of a mesh this node joined: init --force without a trust flag keeps that mesh; to found a new mesh instead, remove %s first", dataDir, certFile)
	}
	if a, err = authority.Generate(); err != nil {
		return nil, err
	}
	if err := a.Save(path); err != nil {
		return nil, fmt.Errorf("mesh authority: %w", err)
	}
	return a, nil
}

// authorityNodeOf returns the peer id of the invitation's first address: the authority's
// node, which issued it.
func authorityNodeOf(inv authority.Invite) string {
	for _, s := range inv.Addrs {
		if ai, err := node.ParseBootstrap(s); err == nil {
			return ai.ID.String()
		}
	}
	return ""
}

// joinMesh redeems inv with the authority's node from a short-lived host with the node's key.
func joinMesh(ctx context.Context, key crypto.PrivKey, inv authority.Invite, agentID string, caps []string) (*authority.Certificate, error) {
	h, err := libp2p.New(libp2p.Identity(key), libp2p.NoListenAddrs)
	if err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cert, err := node.Join(ctx, h, inv, agentID, caps)
	if err != nil {
		return nil, fmt.Errorf("join the mesh %s: %w", inv.Authority, err)
	}
	return cert, nil
}
