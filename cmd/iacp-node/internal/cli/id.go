package cli

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/identity"
	"github.com/iacp-node/iacp-node/node"
)

func init() { register(newIDCmd) }

func newIDCmd() *cobra.Command {
	var dataDir, config string
	cmd := &cobra.Command{
		Use:   "id",
		Short: "Print the peer id and agent id of a data directory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags()); err != nil {
				return err
			}
			key, err := identity.Load(filepath.Join(dataDir, node.KeyFile))
			if err != nil {
				return fmt.Errorf("%w (create one with: iacp-node init --data-dir %s)", err, dataDir)
			}
			cfg, _, err := loadConfig(configPath(dataDir, config))
			if err != nil {
				return err
			}
			pid := identity.PeerID(key).String()
			if cfg.AgentID == "" {
				cfg.AgentID = defaultAgentID(pid)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "peer id   %s\nagent id  %s\n", pid, cfg.AgentID)
			return nil
		},
	}
	dataDirFlag(cmd, &dataDir)
	cmd.Flags().StringVar(&config, "config", "", "config file (default <data-dir>/config.yaml)")
	return cmd
}

func splitComma(s string) []string {
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}
