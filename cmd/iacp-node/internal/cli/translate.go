package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/dialect"
	"github.com/iacp-node/iacp-node/protocol"
)

func newEnvelopeTranslateCmd() *cobra.Command {
	var from, to, sender string
	cmd := &cobra.Command{
		Use:   "translate --to DIALECT [--from DIALECT] [IN]",
		Short: "Convert a document between IACP and the other drafts' shapes",
		Long: `translate reads one JSON document and writes it in another draft's shape
(docs/dialects.md), one of:
` + dialectTable() + `
Without --from the dialect is recognised by the document's members. What the target has no
field for travels under the IACP message's "x-dialect" member, so translating back gives the
original document. An IACP document written here is unsigned: sign it with 'envelope sign'.
A document the target cannot express is refused, saying why.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := readInput(cmd.InOrStdin(), argOr(args, 0))
			if err != nil {
				return err
			}
			out, err := translate(in, dialect.Dialect(from), dialect.Dialect(to), sender, time.Now())
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), string(out))
			return err
		},
	}
	names := []string{string(dialect.IACP)}
	for _, d := range dialect.Translated {
		names = append(names, string(d))
	}
	cmd.Flags().StringVar(&from, "from", "", "the input's dialect, one of "+strings.Join(names, ", ")+" (default: recognised)")
	cmd.Flags().StringVar(&to, "to", "", "the output's dialect, one of "+strings.Join(names, ", ")+" (required)")
	cmd.Flags().StringVar(&sender, "sender", "", "the sender's agent id, which a node fills when it sends (default: the input's own, sender.agent_id, ACP v2's from or A2ACP's source_agent.agent_id)")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

// translate converts doc from one dialect to another through the IACP message it maps to.
// sender, or else the input's own (dialect.Draft.Sender), stands for what a node would fill.
func translate(doc []byte, from, to dialect.Dialect, sender string, now time.Time) ([]byte, error) {
	if from == "" {
		var err error
		if from, err = dialect.Recognise(doc); err != nil {
			return nil, fmt.Errorf("%w (or name it with --from)", err)
		}
	}
	var m *protocol.Message
	if from == dialect.IACP {
		var err error
		if m, err = protocol.Decode(doc); err != nil {
			return nil, err
		}
	} else {
		dec, err := dialect.Decode(from, doc)
		if err != nil {
			return nil, err
		}
		draft, err := dialect.ToIACP(dec, now)
		if err != nil {
			return nil, err
		}
		if m, err = draft.Message(); err != nil {
			return nil, err
		}
		m.Envelope.Sender.AgentID = draft.Sender
		// A node stamps the time, and a TTL when the document set none, as it seals the
		// message; a translation on its own does too, for the targets that require them.
		m.Envelope.Timestamp = now.UTC().Format(time.RFC3339Nano)
		if m.Envelope.TTLSeconds == 0 {
			m.Envelope.TTLSeconds = int64(protocol.DefaultTTL / time.Second)
		}
	}
	if sender != "" {
		m.Envelope.Sender.AgentID = sender
	}
	if to == dialect.IACP {
		return protocol.EncodeJSON(m)
	}
	return dialect.FromIACP(m, to)
}

// dialectTable lists protocol.Dialects for a help text, a line each.
func dialectTable() string {
	var b strings.Builder
	for _, d := range protocol.Dialects() {
		fmt.Fprintf(&b, "  %-9s %s: %s\n", d.Name, d.Draft, d.Shape)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
