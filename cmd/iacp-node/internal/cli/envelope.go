package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/identity"
	"github.com/iacp-node/iacp-node/protocol"
)

func init() { register(newEnvelopeCmd) }

func newEnvelopeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "envelope",
		Short: "Sign, verify, reformat and translate IACP documents offline",
		Long: `envelope works on IACP documents in files or on standard input, without a node.
JSON or YAML input is detected from the first character ('{' means JSON).`,
	}
	cmd.AddCommand(newEnvelopeSignCmd(), newEnvelopeVerifyCmd(), newEnvelopeFmtCmd(), newEnvelopeTranslateCmd())
	return cmd
}

func newEnvelopeSignCmd() *cobra.Command {
	var keyFile, agentID, to string
	cmd := &cobra.Command{
		Use:   "sign --key FILE [IN]",
		Short: "Sign a document with a key, filling in what the node owns",
		Long: `sign fills what is missing of version, message_id (UUIDv7), timestamp, ttl_seconds and
a request's correlation_id, sets sender.peer_id to the key's peer id, and writes
sender.identity_sig: Ed25519 over SHA-256 of the RFC 8785 canonical document without the
signature. sender.agent_id comes from --agent-id or the document.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, m, err := readDoc(cmd, args)
			if err != nil {
				return err
			}
			key, err := identity.Load(keyFile)
			if err != nil {
				return err
			}
			if agentID == "" {
				agentID = m.Envelope.Sender.AgentID
			}
			if agentID == "" {
				return fmt.Errorf("the document has no sender.agent_id: pass --agent-id namespace:host:name")
			}
			b, err := protocol.NewBuilder(agentID, key, time.Now)
			if err != nil {
				return err
			}
			m.Envelope.Sender.IdentitySig = ""
			if err := b.Seal(m); err != nil {
				return err
			}
			return writeDoc(cmd, m, to, in)
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "Ed25519 key file, as written by keygen (required)")
	cmd.Flags().StringVar(&agentID, "agent-id", "", "sender agent id (default: the document's sender.agent_id)")
	cmd.Flags().StringVar(&to, "to", "", "output format, json or yaml (default: the input's)")
	_ = cmd.MarkFlagRequired("key")
	return cmd
}

func newEnvelopeVerifyCmd() *cobra.Command {
	var at string
	cmd := &cobra.Command{
		Use:   "verify [IN]",
		Short: "Check a document's signature and every validation rule",
		Long: `verify checks the signature against sender.peer_id and validates the document (version,
ids, agent ids, channel, timestamp, TTL, type and intent, payload). A valid document prints
one line and exits 0; an invalid one prints its IACP error code and the reason and exits 2.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			now := time.Now()
			if at != "" {
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return fmt.Errorf("--at: %w", err)
				}
				now = t
			}
			in, err := readInput(cmd.InOrStdin(), argOr(args, 0))
			if err != nil {
				return err
			}
			verdict := func(err error) error {
				code, reason := protocol.CodeOf(err), err.Error()
				var pe *protocol.Error
				if errors.As(err, &pe) && pe.Message != "" {
					reason = pe.Message
				}
				fmt.Fprintf(cmd.OutOrStdout(), "INVALID %s: %s\n", code, reason)
				return &exitError{code: 2, err: fmt.Errorf("document is invalid (%s)", code)}
			}
			m, err := protocol.Decode(in)
			if err != nil {
				return verdict(err)
			}
			if err := protocol.Verify(m); err != nil {
				return verdict(err)
			}
			if err := protocol.Validate(m, now, 0, protocol.Limits{}); err != nil {
				return verdict(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "VALID %s %s/%s from %s (peer %s) to %s\n", m.Envelope.MessageID,
				m.Message.Type, m.Message.Intent, m.Envelope.Sender.AgentID, m.Envelope.Sender.PeerID, m.Envelope.Recipient.AgentID)
			return nil
		},
	}
	cmd.Flags().StringVar(&at, "at", "", "validate as of this RFC 3339 time instead of now")
	return cmd
}

func newEnvelopeFmtCmd() *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "fmt --to json|yaml [IN]",
		Short: "Convert a document between JSON and YAML",
		Long:  `fmt rewrites a document in the other format. Unknown fields are kept, and the signature stays valid.`,
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, m, err := readDoc(cmd, args)
			if err != nil {
				return err
			}
			return writeDoc(cmd, m, to, in)
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "output format, json or yaml (required)")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

func writeDoc(cmd *cobra.Command, m *protocol.Message, to string, in []byte) error {
	f := protocol.DetectFormat(in)
	if to != "" {
		var err error
		if f, err = protocol.ParseFormat(to); err != nil {
			return err
		}
	}
	out, err := protocol.Encode(m, f)
	if err != nil {
		return err
	}
	if f == protocol.JSON {
		out = append(out, '\n')
	}
	_, err = cmd.OutOrStdout().Write(out)
	return err
}

// readDoc reads the document named by the command's first argument (standard input when
// there is none, or "-") and decodes it; it returns the bytes read too, whose format the
// output keeps unless told otherwise.
func readDoc(cmd *cobra.Command, args []string) ([]byte, *protocol.Message, error) {
	in, err := readInput(cmd.InOrStdin(), argOr(args, 0))
	if err != nil {
		return nil, nil, err
	}
	m, err := protocol.Decode(in)
	return in, m, err
}

func argOr(args []string, i int) string {
	if i < len(args) {
		return args[i]
	}
	return ""
}
