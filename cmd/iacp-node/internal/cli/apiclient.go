package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/dialect"
	"github.com/iacp-node/iacp-node/protocol"
)

// clientFlags are the flags of every command that talks to a running node through its API.
type clientFlags struct {
	dataDir string
	addr    string
	token   string
	output  string
	// opts configure the client beyond the flags (inbox raises its answer limit).
	opts []apiclient.Option
}

func addClientFlags(cmd *cobra.Command, f *clientFlags) {
	cmd.Flags().StringVar(&f.dataDir, "data-dir", envDataDir(), dataDirHelp+", where api.addr and api.token are")
	cmd.Flags().StringVar(&f.addr, "api", "", "the API address host:port (default: read from <data-dir>/api.addr)")
	cmd.Flags().StringVar(&f.token, "token", "", "the API token (default: read from <data-dir>/api.token)")
	cmd.Flags().StringVarP(&f.output, "output", "o", "table", "output format: json, yaml or table")
}

// client returns a client of the node named by the flags.
func (f *clientFlags) client() (*apiclient.Client, error) {
	switch f.output {
	case "json", "yaml", "table":
	default:
		return nil, fmt.Errorf("-o %q: use json, yaml or table", f.output)
	}
	if f.addr == "" {
		c, err := apiclient.Dial(f.dataDir, f.opts...)
		if err != nil {
			return nil, err
		}
		if f.token != "" {
			return apiclient.New(c.Base(), f.token, f.opts...), nil
		}
		return c, nil
	}
	tok := f.token
	if tok == "" {
		t, err := api.ReadToken(f.dataDir)
		if err != nil {
			return nil, fmt.Errorf("no API token: pass --token or --data-dir of the node (%w)", err)
		}
		tok = t
	}
	return apiclient.New(f.addr, tok, f.opts...), nil
}

// withClient opens a client of the node's API, runs fn with it and closes it.
func (f *clientFlags) withClient(fn func(c *apiclient.Client) error) error {
	c, err := f.client()
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}

// print writes v as JSON or YAML, or calls table for -o table.
func (f *clientFlags) print(w io.Writer, v any, table func(tw *tabwriter.Writer)) error {
	raw, err := api.EncodeJSON(v)
	if err != nil {
		return err
	}
	switch f.output {
	case "yaml":
		y, err := protocol.JSONToYAML(raw)
		if err != nil {
			return err
		}
		_, err = w.Write(y)
		return err
	case "table":
		if table != nil {
			tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
			table(tw)
			return tw.Flush()
		}
	}
	var pretty any
	_ = json.Unmarshal(raw, &pretty)
	out, _ := json.MarshalIndent(pretty, "", "  ")
	_, err = fmt.Fprintf(w, "%s\n", out)
	return err
}

// messageFlags build a message from flags, or read a whole document.
type messageFlags struct {
	to, intent, payload, channel, file, dialect string
	ttl                                         time.Duration
	raw                                         []byte // the --file document, once read
	approval                                    bool   // security.require_approval
	queueUnknown                                bool   // ?queue_unknown=true
}

func addMessageFlags(cmd *cobra.Command, f *messageFlags) {
	cmd.Flags().StringVar(&f.to, "to", "", "recipient agent id (namespace:host:name)")
	cmd.Flags().StringVar(&f.intent, "intent", "handoff", "intent: handoff, query, negotiate, notify, health or x-custom")
	cmd.Flags().StringVar(&f.payload, "payload", "", "payload: a JSON object, or @file")
	cmd.Flags().StringVar(&f.channel, "channel", "", "channel (default: by intent)")
	cmd.Flags().DurationVar(&f.ttl, "ttl", 0, "time to live (default: the node's, 1h)")
	cmd.Flags().BoolVar(&f.approval, "require-approval", false, "hold the message on this node until its operator approves it ('iacp-node approve ID'; docs/coordination.md)")
	cmd.Flags().StringVarP(&f.file, "file", "f", "", "send a whole JSON or YAML document from a file (- for stdin) instead of --to/--intent/--payload")
	cmd.Flags().BoolVar(&f.queueUnknown, "queue-unknown", false, "queue the message even when no agent of that id is known yet (one that will join later); without it an unknown id fails at once")
	cmd.Flags().StringVar(&f.dialect, "dialect", "", "the --file document's draft: "+protocol.DialectList(protocol.DialectNames(true))+" (default: recognised by its members; docs/dialects.md)")
}

// foreignDocument returns the --file document when it is another draft's (named by --dialect
// or recognised), for the node to translate; nil when it is an IACP document or there is none.
func (f *messageFlags) foreignDocument(stdin io.Reader) ([]byte, error) {
	if f.file == "" {
		if f.dialect != "" {
			return nil, fmt.Errorf("--dialect names the draft of a --file document: give one")
		}
		return nil, nil
	}
	if f.approval {
		return nil, fmt.Errorf("--require-approval builds the message from --to/--intent/--payload; a --file document asks for approval itself (IACP: security.require_approval: true; ACP v2: security.requireApproval: true)")
	}
	raw, err := readInput(stdin, f.file)
	if err != nil {
		return nil, err
	}
	d := dialect.Dialect(f.dialect)
	if d == "" {
		d, _ = dialect.Recognise(raw)
	}
	if d == "" || d == dialect.IACP {
		f.raw = raw
		return nil, nil
	}
	return raw, nil
}

func (f *messageFlags) message(stdin io.Reader, typ protocol.Type) (*protocol.Message, error) {
	if f.raw != nil {
		return protocol.Decode(f.raw) // read by foreignDocument
	}
	if f.file != "" {
		raw, err := readInput(stdin, f.file)
		if err != nil {
			return nil, err
		}
		return protocol.Decode(raw)
	}
	if f.to == "" {
		return nil, fmt.Errorf("say whom to send to with --to AGENT, or give a document with --file")
	}
	m := &protocol.Message{}
	m.Envelope.Recipient.AgentID = f.to
	m.Envelope.Recipient.Channel = f.channel
	if f.ttl > 0 {
		m.Envelope.TTLSeconds = int64((f.ttl + time.Second - 1) / time.Second)
	}
	m.Message.Type = typ
	m.Message.Intent = protocol.Intent(f.intent)
	protocol.WithSecurity(protocol.Security{RequireApproval: f.approval})(m)
	payload, err := readPayload(stdin, f.payload)
	if err != nil {
		return nil, err
	}
	m.Message.Payload = payload
	return m, nil
}

// readPayload reads a --payload value: a JSON or YAML object, or @file (- for stdin); "" is {}.
func readPayload(stdin io.Reader, arg string) (json.RawMessage, error) {
	payload := []byte("{}")
	if arg != "" {
		payload = []byte(arg)
		if name, ok := strings.CutPrefix(arg, "@"); ok {
			raw, err := readInput(stdin, name)
			if err != nil {
				return nil, err
			}
			payload = raw
		}
		if protocol.DetectFormat(payload) == protocol.YAML {
			j, err := protocol.YAMLToJSON(payload)
			if err != nil {
				return nil, fmt.Errorf("--payload is neither a JSON object nor YAML: %w", err)
			}
			payload = j
		}
		var obj map[string]any
		if err := json.Unmarshal(payload, &obj); err != nil {
			return nil, fmt.Errorf("--payload must be a JSON object: %w", err)
		}
	}
	return payload, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// showCmd builds a command that fetches one document from the running node's API and prints
// it as JSON, YAML or, through table, a table.
func showCmd[T any](use, short string, fetch func(*apiclient.Client, context.Context) (T, error), table func(*tabwriter.Writer, T)) *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cf.withClient(func(c *apiclient.Client) error {
				doc, err := fetch(c, cmd.Context())
				if err != nil {
					return err
				}
				return cf.print(cmd.OutOrStdout(), doc, func(tw *tabwriter.Writer) { table(tw, doc) })
			})
		},
	}
	addClientFlags(cmd, &cf)
	return cmd
}

// convert is v as the type T whose JSON it has: a document of the node's own types as the
// API client's (apiclient), or back.
func convert[T any](v any) (T, error) {
	var out T
	raw, err := json.Marshal(v)
	if err != nil {
		return out, err
	}
	return out, json.Unmarshal(raw, &out)
}

// wire is the IACP message m as the API client sends it.
func wire(m *protocol.Message) (*apiclient.Message, error) {
	raw, err := protocol.EncodeJSON(m)
	if err != nil {
		return nil, err
	}
	return apiclient.ParseMessage(raw)
}
