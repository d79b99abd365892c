package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	logging "github.com/ipfs/go-log/v2"
	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/identity"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

func init() { register(newRunCmd) }

// runFlags are the settings `run` takes on its command line; each also comes from the config
// file and from an IACP_ environment variable.
type runFlags struct {
	dataDir, config, agentID, apiAddr, logLevel string
	webhook, webhookToken, dialect              string
	reachability                                string
	caps, listen, bootstrap                     []string
	heartbeat                                   time.Duration
	mdns, nat, dhtClient, relay                 bool
	apiAllowRemote                              bool
}

func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the node: join the mesh, serve the agent, stop cleanly on SIGINT/SIGTERM",
		Long: `run starts the node with the data directory's config.yaml, which iacp-node init writes
(founding a mesh, joining one, or a lab node: run refuses a data directory that chose none),
prints its peer id and full listen multiaddrs, and serves the local agent API.
Settings come from, in rising precedence: the defaults, the config file, IACP_ environment
variables (IACP_AGENT_ID, IACP_LISTEN=a,b, ...), and flags. SIGINT or SIGTERM stops it
cleanly: in-flight exchanges finish, peers hear it draining, then offline.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags()); err != nil {
				return err
			}
			cfg, err := runConfig(cmd, &f)
			if err != nil {
				return err
			}
			path := configPath(f.dataDir, f.config)
			_, exists, _ := loadConfig(path)
			if err := chosenTrust(cfg, exists, path); err != nil {
				return err
			}
			if err := logging.SetLogLevel("iacp", cfg.LogLevel); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runNode(ctx, cmd, cfg, &f)
		},
	}
	fl := cmd.Flags()
	defaults := node.DefaultConfig() // the flags' defaults, for their help: the node's own
	dataDirFlag(cmd, &f.dataDir)
	fl.StringVar(&f.config, "config", "", "config file (default <data-dir>/config.yaml; env IACP_CONFIG)")
	fl.StringVar(&f.agentID, "agent-id", "", "agent id, namespace:host:name (env IACP_AGENT_ID)")
	fl.StringSliceVar(&f.caps, "capabilities", nil, "capabilities, kind:name, e.g. tool:terminal,model:llama3,domain:security; a bare name is a tool (env IACP_CAPABILITIES)")
	fl.StringArrayVar(&f.listen, "listen", nil, "libp2p listen multiaddr, repeatable (env IACP_LISTEN)")
	fl.StringArrayVar(&f.bootstrap, "bootstrap", nil, "bootstrap peer multiaddr with /p2p/, repeatable (env IACP_BOOTSTRAP)")
	fl.StringVar(&f.apiAddr, "api", defaultAPIAddr, "local API listen address (env IACP_API)")
	fl.BoolVar(&f.apiAllowRemote, "api-allow-remote", false, "let the local API listen off loopback; its token then travels in clear, so put a TLS-terminating proxy in front (env IACP_API_ALLOW_REMOTE)")
	fl.StringVar(&f.logLevel, "log-level", "", "debug, info, warn or error (env IACP_LOG_LEVEL)")
	fl.DurationVar(&f.heartbeat, "heartbeat-interval", 0, "heartbeat interval, 1s to 300s (env IACP_HEARTBEAT_INTERVAL)")
	fl.BoolVar(&f.mdns, "mdns", defaults.MDNS, "also find peers on the local network (env IACP_MDNS)")
	fl.BoolVar(&f.nat, "nat", defaults.NAT, "AutoNAT, relay client and hole punching (env IACP_NAT)")
	fl.StringVar(&f.reachability, "reachability", defaults.Reachability, "auto (AutoNAT finds out), public (a bootstrap node or relay) or private (behind a NAT) (env IACP_REACHABILITY)")
	fl.BoolVar(&f.relay, "relay", defaults.Relay, "serve circuit relay v2 to nodes behind NATs, once public (env IACP_RELAY)")
	fl.BoolVar(&f.dhtClient, "dht-client", defaults.DHTClient, "run the DHT in client mode (env IACP_DHT_CLIENT)")
	fl.StringVar(&f.webhook, "webhook", "", "POST inbound messages to this agent URL (its /.well-known/iacp/v1/message; env IACP_WEBHOOK)")
	fl.StringVar(&f.webhookToken, "webhook-token", "", "bearer token the webhook sends to the agent (env IACP_WEBHOOK_TOKEN)")
	fl.StringVar(&f.dialect, "dialect", "", "the draft the agent speaks: "+protocol.DialectList(protocol.DialectNames(false))+"; the local API hands it messages in it (default "+defaults.Dialect+"; env IACP_DIALECT)")
	return cmd
}

// defaultAPIAddr is the local API's default address: loopback, in IaCP 1.0's 9000-9999 range.
const defaultAPIAddr = "127.0.0.1:9700"

// runConfig merges defaults, the config file and the flags (which already hold the
// environment) into the node's configuration.
func runConfig(cmd *cobra.Command, f *runFlags) (node.Config, error) {
	cfg, _, err := loadConfig(configPath(f.dataDir, f.config))
	if err != nil {
		return cfg, err
	}
	cfg.DataDir = f.dataDir
	changed := cmd.Flags().Changed
	if changed("agent-id") {
		cfg.AgentID = f.agentID
	}
	if changed("capabilities") {
		if err := parseCapabilities(f.caps, &cfg.Manifest); err != nil {
			return cfg, err
		}
	}
	if changed("listen") {
		cfg.ListenAddrs = splitAll(f.listen)
	}
	if changed("bootstrap") {
		cfg.Bootstrap = splitAll(f.bootstrap)
	}
	if changed("log-level") {
		cfg.LogLevel = f.logLevel
	}
	if changed("heartbeat-interval") {
		cfg.HeartbeatInterval = f.heartbeat
	}
	if changed("mdns") {
		cfg.MDNS = f.mdns
	}
	if changed("nat") {
		cfg.NAT = f.nat
	}
	if changed("reachability") {
		cfg.Reachability = f.reachability
	}
	if changed("relay") {
		cfg.Relay = f.relay
	}
	if changed("dht-client") {
		cfg.DHTClient = f.dhtClient
	}
	if changed("dialect") {
		cfg.Dialect = f.dialect
	}
	if cfg.AgentID == "" {
		key, _, err := identity.LoadOrCreate(filepath.Join(cfg.DataDir, node.KeyFile))
		if err != nil {
			return cfg, err
		}
		cfg.AgentID = defaultAgentID(identity.PeerID(key).String())
	}
	cfg.Inbox = true
	return cfg, nil
}

// chosenTrust refuses to run a node whose data directory chose no trust mode: one never made
// with init (no config file), or a config that names neither a trust mode nor a mesh
// authority. Such a node would run open, where any peer may claim an agent id nobody claimed
// before; the secure default is init's, which founds a mesh, and run says how to choose.
func chosenTrust(cfg node.Config, exists bool, path string) error {
	if cfg.Trust != "" || cfg.Authority != "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, node.AuthorityKeyFile)); err == nil {
		return nil // a founder's data directory: authority mode
	}
	what := "names no trust mode"
	if !exists {
		what = "does not exist"
	}
	return fmt.Errorf("%s %s, so this node belongs to no mesh yet; choose one first:\n"+
		"  iacp-node init --data-dir %s                 found a mesh (this node holds its authority)\n"+
		"  iacp-node init --data-dir %s --join TOKEN    join a mesh with an invitation from iacp-node invite\n"+
		"  iacp-node init --data-dir %s --open          a lab node that trusts on first use (docs/trust.md)\n"+
		"then iacp-node run --data-dir %s (make run does both on embedded defaults)", path, what, cfg.DataDir, cfg.DataDir, cfg.DataDir, cfg.DataDir)
}

// runNode starts the node and its local API, prints where it listens, and waits for ctx.
func runNode(ctx context.Context, cmd *cobra.Command, cfg node.Config, f *runFlags) error {
	memory := applyMemoryLimit(cfg.MemoryLimit)
	n, err := node.New(node.WithConfig(cfg))
	if err != nil {
		return listenHint(err)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "iacp-node %s\nagent id  %s\npeer id   %s\ncapabilities %s\n", Version, n.AgentID(), n.ID(), capabilityList(cfg.Manifest))
	fmt.Fprintf(out, "trust     %s\n", trustSummary(n))
	fmt.Fprintln(out, memory)
	return serveUntilDone(ctx, n, cfg, f, out, n.Close)
}

// trustSummary is run's line about who may speak for an agent id on this node.
func trustSummary(n *node.Node) string {
	c := n.Config()
	switch n.Trust().Mode() {
	case node.TrustAuthority:
		if c.MeshAuthority != nil {
			return "authority " + c.Authority + " (this node holds the mesh authority: invite agents with iacp-node invite)"
		}
		return "authority " + c.Authority
	case node.TrustAllowlist:
		return "allowlist " + c.AllowlistFile
	}
	return "open (trust on first use, for labs; docs/trust.md)"
}

func splitAll(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, s := range splitComma(v) {
			if s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}
