package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/coord"
	"github.com/iacp-node/iacp-node/protocol"
)

func init() {
	register(newScatterCmd)
	register(newPipelineCmd)
}

// coordFlags are the per-call settings of the coordination commands (docs/coordination.md).
type coordFlags struct {
	capability string
	timeout    time.Duration
	attempts   int
}

func addCoordFlags(cmd *cobra.Command, f *coordFlags, withCapability bool) {
	if withCapability {
		cmd.Flags().StringVar(&f.capability, "capability", "", "KIND:NAME (tool, model or domain): ask agents with this capability, found by discovery")
	}
	cmd.Flags().DurationVar(&f.timeout, "timeout", 0, "each attempt's timeout and TTL (default 10s)")
	cmd.Flags().IntVar(&f.attempts, "attempts", 0, "attempts per agent on a retryable error (RATE_LIMITED, TIMEOUT, INTERNAL_ERROR, AGENT_NOT_FOUND), with backoff; 0 or 1: once")
}

// parseCapability reads KIND:NAME.
func parseCapability(s string) (*coord.Capability, error) {
	kind, name, ok := strings.Cut(s, ":")
	if !ok || name == "" {
		return nil, fmt.Errorf("--capability %q: use KIND:NAME, e.g. tool:terminal (kind tool, model or domain)", s)
	}
	return &coord.Capability{Kind: kind, Name: name}, nil
}

// request builds the coordination request of the flags.
func (f *coordFlags) request(stdin io.Reader, agents []string, intent, payload, channel string) (api.CoordRequest, error) {
	q := api.CoordRequest{Agents: agents, Intent: protocol.Intent(intent), Channel: channel}
	if f.capability != "" {
		if len(agents) > 0 {
			return q, fmt.Errorf("give agents or --capability, not both")
		}
		c, err := parseCapability(f.capability)
		if err != nil {
			return q, err
		}
		q.Capability = c
	}
	p, err := readPayload(stdin, payload)
	if err != nil {
		return q, err
	}
	q.Payload = p
	if f.timeout > 0 {
		q.Timeout = f.timeout.String()
	}
	if f.attempts > 1 {
		q.Retry = &api.RetryDoc{Attempts: f.attempts}
	}
	return q, nil
}

// coordRequest is `request --capability` (any-of) and `request --fallback` (ordered).
func coordRequest(cmd *cobra.Command, cf *clientFlags, mf *messageFlags, co *coordFlags, fallback []string, wait time.Duration) error {
	if mf.to != "" || mf.file != "" {
		return fmt.Errorf("--capability and --fallback choose the recipient: leave out --to and --file")
	}
	q, err := co.request(cmd.InOrStdin(), fallback, mf.intent, mf.payload, mf.channel)
	if err != nil {
		return err
	}
	return cf.withClient(func(c *apiclient.Client) error {
		var res api.ResultDoc
		if len(fallback) > 0 {
			res, err = api.CoordFallback(cmd.Context(), c, q, wait)
		} else {
			res, err = api.CoordAny(cmd.Context(), c, q, wait)
		}
		if err != nil {
			return err
		}
		return cf.print(cmd.OutOrStdout(), res, func(tw *tabwriter.Writer) {
			status, _ := protocol.StatusOf(res.Response)
			fmt.Fprintf(tw, "FROM\t%s\nSTATUS\t%s\nATTEMPTS\t%d\n", res.AgentID, orDash(status), res.Attempts)
			for _, tr := range res.Tried {
				fmt.Fprintf(tw, "TRIED\t%s: %s\n", tr.AgentID, tr.Code)
			}
			fmt.Fprintf(tw, "PAYLOAD\t%s\n", res.Response.Message.Payload)
		})
	})
}

func newScatterCmd() *cobra.Command {
	var cf clientFlags
	var co coordFlags
	var to []string
	var intent, payload, channel, completion string
	var k int
	var deadline time.Duration
	cmd := &cobra.Command{
		Use:   "scatter (--to A,B,... | --capability KIND:NAME) --intent I [--payload JSON|@file] [--completion all|first-k|quorum] [--k N] [--deadline D]",
		Short: "Send one request to many agents at once and gather their answers",
		Long: `scatter sends the request to every agent of --to, or to every agent with --capability (found
by discovery), at once, and gathers the answers until the completion rule is decided or the
--deadline passes (default 30s): all (every answer), first-k (the first --k answers, default 1)
or quorum (--k equal answers, default a majority). It prints each answer, each error by code,
who did not answer in time and who was cancelled once the rule was decided. A rule not met
exits 1 with the aggregate printed. See docs/coordination.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := co.request(cmd.InOrStdin(), to, intent, payload, channel)
			if err != nil {
				return err
			}
			q.Completion, q.K = completion, k
			if deadline > 0 {
				q.Deadline = deadline.String()
			}
			return cf.withClient(func(c *apiclient.Client) error {
				g, err := api.CoordScatter(cmd.Context(), c, q, deadline+time.Minute)
				if err != nil {
					return err
				}
				if err := cf.print(cmd.OutOrStdout(), g, func(tw *tabwriter.Writer) { gatherTable(tw, g) }); err != nil {
					return err
				}
				if g.Error != nil {
					return &exitError{code: 1, err: g.Error.AsError()}
				}
				return nil
			})
		},
	}
	addClientFlags(cmd, &cf)
	addCoordFlags(cmd, &co, true)
	cmd.Flags().StringSliceVar(&to, "to", nil, "the agents, comma-separated or repeated")
	cmd.Flags().StringVar(&intent, "intent", "query", "intent: handoff, query, negotiate or notify")
	cmd.Flags().StringVar(&payload, "payload", "", "payload: a JSON object, or @file")
	cmd.Flags().StringVar(&channel, "channel", "", "channel (default: by intent)")
	cmd.Flags().StringVar(&completion, "completion", "all", "all, first-k or quorum")
	cmd.Flags().IntVar(&k, "k", 0, "first-k's count (default 1) or quorum's (default a majority)")
	cmd.Flags().DurationVar(&deadline, "deadline", 0, "bound on the whole scatter (default 30s)")
	return cmd
}

func gatherTable(tw *tabwriter.Writer, g api.GatherDoc) {
	fmt.Fprintf(tw, "MET\t%v\n", g.Met)
	fmt.Fprintln(tw, "AGENT\tRESULT\tPAYLOAD")
	for _, a := range g.Answers {
		status, _ := protocol.StatusOf(a.Response)
		fmt.Fprintf(tw, "%s\t%s\t%s\n", a.AgentID, orDash(status), a.Response.Message.Payload)
	}
	for code, fs := range g.Errors {
		for _, f := range fs {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", f.AgentID, code, f.Message)
		}
	}
	for _, id := range g.TimedOut {
		fmt.Fprintf(tw, "%s\ttimed out\t-\n", id)
	}
	for _, id := range g.Cancelled {
		fmt.Fprintf(tw, "%s\tcancelled\t-\n", id)
	}
	if len(g.Agreed) > 0 {
		fmt.Fprintf(tw, "AGREED\t%s\n", g.Agreed)
	}
}

func newPipelineCmd() *cobra.Command {
	var cf clientFlags
	var co coordFlags
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "pipeline FILE",
		Short: "Run ordered steps, each step's response feeding the next step's parameters",
		Long: `pipeline reads a pipeline from FILE (JSON or YAML; - for stdin) and runs it through the node:

  correlation_id: chain-42        # optional: every request carries it (default: a new id)
  input: {text: "hello"}          # optional: the first step's input
  steps:
    - {name: translate, capability: {kind: tool, name: translate}, intent: query}
    - {name: review, agents: [acme:prod:rev1, acme:prod:rev2], intent: query}
    - {name: store, agent: acme:prod:archive, intent: handoff, payload: {bucket: b}}

Each step asks one agent (agent), ordered candidates (agents) or any agent with a capability;
its request's payload is the previous response's payload without "status", overlaid by the
step's own payload. The first failing step stops the chain and exits 1. See
docs/coordination.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := readInput(cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			if protocol.DetectFormat(raw) == protocol.YAML {
				if raw, err = protocol.YAMLToJSON(raw); err != nil {
					return fmt.Errorf("%s: not JSON or YAML: %w", args[0], err)
				}
			}
			var q api.PipelineRequest
			if err := json.Unmarshal(raw, &q); err != nil {
				return fmt.Errorf("%s: not a pipeline (correlation_id, input, steps): %w", args[0], err)
			}
			if co.timeout > 0 {
				q.Timeout = co.timeout.String()
			}
			if co.attempts > 1 {
				q.Retry = &api.RetryDoc{Attempts: co.attempts}
			}
			return cf.withClient(func(c *apiclient.Client) error {
				p, err := api.CoordPipeline(cmd.Context(), c, q, wait)
				if err != nil {
					return err
				}
				if err := cf.print(cmd.OutOrStdout(), p, func(tw *tabwriter.Writer) { pipelineTable(tw, p) }); err != nil {
					return err
				}
				if p.Error != nil {
					return &exitError{code: 1, err: p.Error.AsError()}
				}
				return nil
			})
		},
	}
	addClientFlags(cmd, &cf)
	addCoordFlags(cmd, &co, false)
	cmd.Flags().DurationVar(&wait, "wait", 5*time.Minute, "how long to wait for the whole pipeline")
	return cmd
}

func pipelineTable(tw *tabwriter.Writer, p api.PipelineDoc) {
	fmt.Fprintf(tw, "CORRELATION\t%s\n", p.CorrelationID)
	fmt.Fprintln(tw, "STEP\tAGENT\tRESULT")
	for _, s := range p.Steps {
		result := "ok"
		if s.Error != nil {
			result = string(s.Error.Code) + ": " + s.Error.Message
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, orDash(s.AgentID), result)
	}
	if p.Output != nil {
		fmt.Fprintf(tw, "OUTPUT\t%s\n", p.Output)
	}
}
