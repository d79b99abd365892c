package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// ConfigFile is the config's name inside the data directory.
const ConfigFile = "config.yaml"

// envPrefix prefixes the environment variable of every flag: --agent-id is IACP_AGENT_ID.
const envPrefix = "IACP_"

// dataDirFlag adds --data-dir to a command that runs applyEnv, which fills it from
// IACP_DATA_DIR when it is not given; the default is node.DefaultDataDir.
func dataDirFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVar(dst, "data-dir", node.DefaultDataDir, "data directory (env IACP_DATA_DIR)")
}

// envDataDir is the --data-dir default of the commands that do not run applyEnv (those that
// read a node's files or talk to its API): $IACP_DATA_DIR, else node.DefaultDataDir.
func envDataDir() string {
	if d := os.Getenv(envPrefix + "DATA_DIR"); d != "" {
		return d
	}
	return node.DefaultDataDir
}

// dataDirHelp is the help of --data-dir for the commands that use envDataDir.
const dataDirHelp = "the node's data directory (default $IACP_DATA_DIR or " + node.DefaultDataDir + ")"

// applyEnv sets every flag the user did not give from its IACP_ environment variable. A list
// flag takes a comma-separated value.
func applyEnv(fs *pflag.FlagSet) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		name := envPrefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v, ok := os.LookupEnv(name)
		if !ok {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	})
	return errors.Join(errs...)
}

// loadConfig reads the config file (when it exists) over the defaults.
func loadConfig(path string) (node.Config, bool, error) {
	cfg := node.DefaultConfig()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, false, nil
	}
	if err != nil {
		return cfg, false, err
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		return cfg, false, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, true, nil
}

// parseCapabilities reads "tool:terminal,model:llama3,domain:security" into the manifest. A
// bare name is a tool ("code-review" is "tool:code-review"); run and init print what they
// understood (capabilityList). An unknown kind is refused with the accepted forms.
func parseCapabilities(list []string, m *protocol.Manifest) error {
	m.Tools, m.Models, m.Domains = nil, nil, nil
	for _, item := range list {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		kind, name, ok := strings.Cut(item, ":")
		if !ok {
			kind, name = "tool", item
		}
		switch kind {
		case "tool", "tools":
			m.Tools = append(m.Tools, name)
		case "model", "models":
			m.Models = append(m.Models, name)
		case "domain", "domains":
			m.Domains = append(m.Domains, name)
		default:
			return fmt.Errorf("capability %q: kind must be tool, model or domain (e.g. tool:terminal)", item)
		}
	}
	return nil
}

// capabilityList says what the manifest advertises, kind by kind ("tool:code-review
// model:llama3"), so that a bare name given on the command line is seen read as a tool.
func capabilityList(m protocol.Manifest) string {
	var out []string
	for _, c := range []struct {
		kind  string
		names []string
	}{{"tool", m.Tools}, {"model", m.Models}, {"domain", m.Domains}} {
		for _, n := range c.names {
			out = append(out, c.kind+":"+n)
		}
	}
	if len(out) == 0 {
		return "none (advertise some with --capabilities tool:NAME,model:NAME,domain:NAME)"
	}
	return strings.Join(out, " ")
}

// defaultAgentID makes an agent id from the host name and the peer id, for a node started on
// embedded defaults.
func defaultAgentID(peerID string) string {
	host, _ := os.Hostname()
	var b strings.Builder
	for _, r := range strings.ToLower(host) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			b.WriteRune(r)
		}
	}
	h := b.String()
	if h == "" || h[0] == '-' {
		h = "host"
	}
	if len(h) > 24 {
		h = h[:24]
	}
	return "local:" + h + ":agent-" + strings.ToLower(peerID[len(peerID)-6:])
}

func configPath(dataDir, explicit string) string {
	if explicit != "" {
		return explicit
	}
	return filepath.Join(dataDir, ConfigFile)
}
