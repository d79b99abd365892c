package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/identity"
)

func init() { register(newKeygenCmd) }

func newKeygenCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen --out FILE",
		Short: "Write a new Ed25519 libp2p private key and print its peer id",
		Long: `keygen writes a new Ed25519 private key in libp2p's protobuf encoding to FILE, with
mode 0600, and prints its peer id. It never overwrites an existing file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, err := identity.Generate()
			if err != nil {
				return err
			}
			if err := identity.Save(out, key); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), identity.PeerID(key))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "file to write the key to (required)")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}
