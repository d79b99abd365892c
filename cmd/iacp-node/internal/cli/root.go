// Package cli implements the iacp-node command line. Each command lives in its own file and
// registers itself with register, so that commands can be added without touching this file.
package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Version is the node's version, set at build time with
// -ldflags "-X github.com/iacp-node/iacp-node/cmd/iacp-node/internal/cli.Version=...".
var Version = "0.1.0-dev"

var commands []func() *cobra.Command

// register adds a top-level command constructor; call it from an init function.
func register(c func() *cobra.Command) { commands = append(commands, c) }

// exitError carries a specific exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// NewRoot builds the command tree.
func NewRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "iacp-node",
		Short: "The IACP mesh node: signed agent-to-agent messaging over libp2p",
		Long: `iacp-node runs beside an AI agent and speaks the Inter-Agent Communication Protocol
(IACP) to other nodes over libp2p: signed envelopes, request/response, discovery through a
Kademlia DHT, broadcasts and heartbeats over gossipsub, and durable delivery.

Start with 'iacp-node init', then 'iacp-node run'. Every command has --help.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	for _, c := range commands {
		root.AddCommand(c())
	}
	return root
}

// Main runs the command line and returns the process exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := NewRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	return exitCode(root.Execute(), stderr)
}

// exitCode is the process exit code of a command's error (0 for none), which it prints to
// stderr: an exitError's code, else 1.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "iacp-node:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

func init() {
	register(func() *cobra.Command {
		return &cobra.Command{
			Use:   "version",
			Short: "Print the node's version and the protocol versions it speaks",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				fmt.Fprintf(cmd.OutOrStdout(), "iacp-node %s (IACP %s)\n", Version, protocolVersions())
				return nil
			},
		}
	})
}
