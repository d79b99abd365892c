package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/protocol"
)

func init() { register(newAskCmd) }

func newAskCmd() *cobra.Command {
	var cf clientFlags
	var group, intent, payload string
	var deadline time.Duration
	var count int
	var expect []string
	cmd := &cobra.Command{
		Use:   "ask [--group CAPABILITY] [--intent I] [--payload JSON|@file] [--deadline D] [--max N] [--expect AGENT,...]",
		Short: "Ask a capability group, or every agent, over gossip and print the answers",
		Long: `ask is a broadcast query (docs/coordination.md): the running node publishes a request to
the agents of a capability group (--group), or to every agent when --group is not given, and
collects the answers they send back directly. It prints them once --max agents answered, every
agent of --expect answered, or --deadline passed: each answer (agent, status, latency,
payload), each error by agent, and the expected agents that did not answer. The intent
defaults to query: every node answers a capability query with its manifest unless its agent
handles query itself. Exit code 0 even when some agents did not answer; 1 on an error.`,
		Example: `  iacp-node ask --group summarise --intent handoff --payload '{"doc":"a.md"}' --deadline 2s --max 3
  iacp-node ask --payload '{"required":{"tools":["terminal"]}}'   # a capability query to every agent`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if deadline <= 0 {
				return fmt.Errorf("--deadline must be positive, e.g. --deadline 2s")
			}
			if count < 0 {
				return fmt.Errorf("--max must be 0 (up to 1024 answers) or more")
			}
			req := api.AskRequest{Group: group, Intent: intent, Deadline: deadline.String(), Count: count, Expect: expect}
			if payload != "" {
				mf := messageFlags{to: "-", intent: intent, payload: payload}
				m, err := mf.message(cmd.InOrStdin(), protocol.TypeRequest)
				if err != nil {
					return err
				}
				req.Payload = json.RawMessage(m.Message.Payload)
			}
			return cf.withClient(func(c *apiclient.Client) error {
				res, err := c.Ask(cmd.Context(), req)
				if err != nil {
					return err
				}
				return cf.print(cmd.OutOrStdout(), res, func(tw *tabwriter.Writer) { askTable(tw, res) })
			})
		},
	}
	addClientFlags(cmd, &cf)
	cmd.Flags().StringVar(&group, "group", "", "capability group to ask (default: every agent)")
	cmd.Flags().StringVar(&intent, "intent", "query", "intent: query, handoff, negotiate or x-custom")
	cmd.Flags().StringVar(&payload, "payload", "", "payload: a JSON object, or @file")
	cmd.Flags().DurationVar(&deadline, "deadline", 2*time.Second, "how long to collect answers (at most 5m)")
	cmd.Flags().IntVar(&count, "max", 0, "stop once this many agents answered (0: up to 1024)")
	cmd.Flags().StringSliceVar(&expect, "expect", nil, "agents expected to answer: stop once all did, list those that did not")
	return cmd
}

func askTable(tw *tabwriter.Writer, res api.AskDoc) {
	fmt.Fprintf(tw, "QUERY\t%s\tgroup %s\tended %s\n", res.QueryID, res.Group, res.Ended)
	fmt.Fprintf(tw, "AGENT\tSTATUS\tLATENCY\tPAYLOAD\n")
	for _, a := range res.Answers {
		fmt.Fprintf(tw, "%s\t%s\t%.1fms\t%s\n", a.AgentID, orDash(a.Status), a.LatencyMS, a.Payload)
	}
	for _, e := range res.Errors {
		fmt.Fprintf(tw, "%s\t%s\t%.1fms\t%s\n", e.AgentID, e.Code, e.LatencyMS, e.Message)
	}
	if len(res.Missing) > 0 {
		fmt.Fprintf(tw, "NO ANSWER\t%s\n", strings.Join(res.Missing, ", "))
	}
}
