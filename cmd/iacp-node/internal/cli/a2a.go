package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	logging "github.com/ipfs/go-log/v2"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/a2abridge"
	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/identity"
	"github.com/iacp-node/iacp-node/node"
)

func init() { register(newA2ACmd) }

// defaultA2AAddr is where `a2a serve` listens by default: loopback, away from the 9700, 9701,
// ... that the local APIs of a machine's nodes take one after another.
const defaultA2AAddr = "127.0.0.1:9780"

func newA2ACmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "a2a",
		Short: "Bridge the mesh and the A2A protocol (Agent2Agent): serve mesh agents to A2A clients, or attach an A2A agent to the mesh",
		Long: `a2a bridges the mesh and A2A (docs/a2a.md). 'a2a serve' runs beside a node and serves its
agent, and any mesh agent by id, to A2A clients: an agent card and a JSON-RPC endpoint each.
'a2a attach' runs a node of its own whose agent is an external A2A agent, named by its card.`,
	}
	cmd.AddCommand(newA2AServeCmd(), newA2AAttachCmd())
	return cmd
}

func newA2AServeCmd() *cobra.Command {
	var cf clientFlags
	var listen, baseURL string
	var wait time.Duration
	var unsigned bool
	cmd := &cobra.Command{
		Use:   "serve [--listen 127.0.0.1:PORT]",
		Short: "Serve the node's agent and the mesh's agents to A2A clients",
		Long: `serve is an A2A server for the agent whose node runs with --data-dir, a client of its local
API (start 'iacp-node run' first). On a loopback address it serves:

  /.well-known/agent-card.json                     the agent's card, from its manifest
  /                                                its A2A JSON-RPC endpoint
  /agents/{agent_id}/.well-known/agent-card.json   a mesh agent's card, from its record
  /agents/{agent_id}/                              its JSON-RPC endpoint

A message/send becomes an IACP request to the agent and waits up to --wait for the answer.
JSON-RPC calls must send the node's API token as a bearer token (the cards say so); the cards
are signed with the node's identity key (<data-dir>/identity.key) unless --unsigned.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cf.withClient(func(c *apiclient.Client) error {
				if _, err := c.Status(cmd.Context()); err != nil {
					return err // say now that no node answers, not at the first call
				}
				o, err := a2aOptions(&cf, baseURL, wait, unsigned)
				if err != nil {
					return err
				}
				b, err := a2abridge.NewServer(c, o)
				if err != nil {
					return err
				}
				defer b.Close()
				ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
				defer stop()
				return serveA2A(ctx, cmd, b, listen)
			})
		},
	}
	addClientFlags(cmd, &cf)
	cmd.Flags().StringVar(&listen, "listen", defaultA2AAddr, "serve A2A on this loopback address")
	cmd.Flags().StringVar(&baseURL, "base-url", "", "the URL A2A clients reach the bridge at, named in the cards (default http://<the Host they asked>)")
	cmd.Flags().DurationVar(&wait, "wait", a2abridge.DefaultWait, "how long one call waits for the agent's answer (at most 5m)")
	cmd.Flags().BoolVar(&unsigned, "unsigned", false, "serve unsigned cards (default: signed with <data-dir>/identity.key)")
	return cmd
}

// a2aOptions are the bridge's options from the flags: the node's API token, and its identity
// key unless unsigned.
func a2aOptions(cf *clientFlags, baseURL string, wait time.Duration, unsigned bool) (a2abridge.Options, error) {
	o := a2abridge.Options{BaseURL: baseURL, Wait: wait, Version: Version, Token: cf.token}
	if o.Token == "" {
		t, err := api.ReadToken(cf.dataDir)
		if err != nil {
			return o, fmt.Errorf("no API token to ask of A2A clients: pass --token or --data-dir of the node (%w)", err)
		}
		o.Token = t
	}
	if !unsigned {
		key, err := readKey(cf.dataDir)
		if err != nil {
			return o, err
		}
		o.Key = key
	}
	return o, nil
}

// readKey reads the node's identity key from its data directory, to sign the cards with.
func readKey(dataDir string) (crypto.PrivKey, error) {
	path := filepath.Join(dataDir, node.KeyFile)
	key, err := identity.Load(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no identity key at %s to sign the cards with: pass --data-dir of the node, or --unsigned", path)
	}
	return key, err
}

// serveA2A serves the bridge on addr, a loopback address, until ctx ends.
func serveA2A(ctx context.Context, cmd *cobra.Command, b *a2abridge.Server, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: want host:port: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--listen %q: serve A2A on a loopback address (127.0.0.1, ::1); it acts with the node's API token", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--listen %s: %w; choose another address with --listen 127.0.0.1:PORT", addr, err)
	}
	srv := &http.Server{Handler: b.Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(cmd.OutOrStdout(), "a2a       http://%s/.well-known/agent-card.json (calls: bearer the node's API token)\n", ln.Addr())
	return serveHTTP(ctx, srv, ln)
}

func newA2AAttachCmd() *cobra.Command {
	var f runFlags
	var cardURL, joinToken string
	var wait time.Duration
	var open bool
	cmd := &cobra.Command{
		Use:   "attach --card URL",
		Short: "Run a node whose agent is an external A2A agent, named by its card",
		Long: `attach fetches the A2A agent card at --card (the card's URL, or a base URL it is under at
/.well-known/agent-card.json) and runs a node whose agent is that A2A agent: its manifest's
tools are the card's skill ids, its domains the skills' tags, published in discovery like any
agent's. Every IACP request to it becomes an A2A message/send to the card's endpoint, waiting
up to --wait; the task's result is the IACP answer (docs/a2a.md).

The node takes its settings as 'run' does (config file, IACP_ variables, flags), with its own
--data-dir; its agent id is --agent-id or the config's, else the invitation's, else
a2a:HOST:NAME from the card. Its local API listens on a free loopback port unless --api says
otherwise.

A mesh founded by 'iacp-node init' admits only certified agents: the attached node joins it
with --join TOKEN, an invitation its founder prints ('iacp-node invite --agent ID'), on its
first start (its data directory is initialised as 'init --join' does). A data directory with
no trust setting (never initialised) and no --join is refused, rather than started in open
mode where a certified mesh would ignore it; --open attaches to an open (lab) mesh.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags()); err != nil {
				return err
			}
			cfg, err := runConfig(cmd, &f)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("agent-id") {
				if fromFile, _, err := loadConfig(configPath(f.dataDir, f.config)); err == nil && fromFile.AgentID == "" {
					cfg.AgentID = "" // the card names it
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			card, err := a2abridge.FetchCard(ctx, cardURL, nil)
			if err != nil {
				return err
			}
			if cfg, err = attachTrust(cmd, cfg, &f, card, joinToken, open); err != nil {
				return err
			}
			return attachA2A(ctx, cmd, cfg, &f, card, wait)
		},
	}
	fl := cmd.Flags()
	dataDirFlag(cmd, &f.dataDir)
	fl.StringVar(&cardURL, "card", "", "the A2A agent card's URL, or the base URL it is under")
	fl.StringVar(&joinToken, "join", "", "join the mesh with this invitation (iacp-node invite) on the first start")
	fl.BoolVar(&open, "open", false, "attach to an open (lab) mesh: trust on first use, no certificate")
	fl.DurationVar(&wait, "wait", a2abridge.DefaultWait, "how long one A2A call may take (at most 5m; a request's TTL bounds it too)")
	fl.StringVar(&f.config, "config", "", "config file (default <data-dir>/config.yaml; env IACP_CONFIG)")
	fl.StringVar(&f.agentID, "agent-id", "", "agent id, namespace:host:name (default a2a:HOST:NAME from the card; env IACP_AGENT_ID)")
	fl.StringArrayVar(&f.listen, "listen", nil, "libp2p listen multiaddr, repeatable (env IACP_LISTEN)")
	fl.StringArrayVar(&f.bootstrap, "bootstrap", nil, "bootstrap peer multiaddr with /p2p/, repeatable (env IACP_BOOTSTRAP)")
	fl.StringVar(&f.apiAddr, "api", "127.0.0.1:0", "local API listen address (env IACP_API)")
	fl.StringVar(&f.logLevel, "log-level", "", "debug, info, warn or error (env IACP_LOG_LEVEL)")
	_ = cmd.MarkFlagRequired("card")
	return cmd
}

// attachTrust settles the attached node's trust before it starts: with --join, the data
// directory is initialised as `init --join` does (unless it joined that mesh already); with
// --open, the node runs open; a data directory with no trust setting is refused otherwise,
// naming invite and --join.
func attachTrust(cmd *cobra.Command, cfg node.Config, f *runFlags, card *a2a.AgentCard, joinToken string, open bool) (node.Config, error) {
	path := configPath(f.dataDir, f.config)
	_, exists, err := loadConfig(path)
	if err != nil {
		return cfg, err
	}
	switch {
	case joinToken != "" && open:
		return cfg, fmt.Errorf("--join and --open: choose one: join a certified mesh with an invitation, or attach to an open lab mesh")
	case joinToken != "" && exists && cfg.Trust == node.TrustAuthority:
		return cfg, nil // joined on an earlier start: the certificate is in the data directory
	case joinToken != "" && exists:
		return cfg, fmt.Errorf("--join: %s exists and runs open; join with `iacp-node init --force --join TOKEN --data-dir %s`, then attach without --join", path, f.dataDir)
	case joinToken != "":
		inf := initFlags{dataDir: f.dataDir, agentID: cfg.AgentID, joinToken: joinToken}
		if inf.agentID == "" {
			if inv, err := authority.DecodeInvite(strings.TrimSpace(joinToken)); err == nil && inv.AgentID == "" {
				inf.agentID = a2abridge.DefaultAgentID(card)
			}
		}
		var out bytes.Buffer // init's own hints (start it with run, invite others) are not attach's
		init := &cobra.Command{}
		init.SetContext(cmd.Context())
		init.SetOut(&out)
		if err := runInit(init, &inf); err != nil {
			return cfg, err
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(line, "trust ") {
				fmt.Fprintln(cmd.OutOrStdout(), line)
			}
		}
		return runConfig(cmd, f)
	case open:
		cfg.Trust = node.TrustOpen
		return cfg, nil
	case cfg.Trust == "":
		return cfg, fmt.Errorf("%s has no trust setting: a mesh founded by `iacp-node init` admits only agents it certified, and would not see this one. "+
			"Ask the founder for an invitation (`iacp-node invite --agent ID` on its node) and attach with --join TOKEN; "+
			"for an open lab mesh, attach with --open", f.dataDir)
	}
	return cfg, nil
}

// attachA2A runs the attached node of card and its local API until ctx ends.
func attachA2A(ctx context.Context, cmd *cobra.Command, cfg node.Config, f *runFlags, card *a2a.AgentCard, wait time.Duration) error {
	if err := logging.SetLogLevel("iacp", cfg.LogLevel); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	memory := applyMemoryLimit(cfg.MemoryLimit)
	att, err := a2abridge.Attach(ctx, card, a2abridge.AttachOptions{Wait: wait}, node.WithConfig(cfg))
	if err != nil {
		return listenHint(err)
	}
	n := att.Node()
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "iacp-node %s\nagent id  %s (the A2A agent %q at %s)\npeer id   %s\ncapabilities %s\n",
		Version, n.AgentID(), card.Name, card.SupportedInterfaces[0].URL, n.ID(), capabilityList(n.Manifest()))
	fmt.Fprintln(out, memory)
	return serveUntilDone(ctx, n, cfg, f, out, att.Close)
}
