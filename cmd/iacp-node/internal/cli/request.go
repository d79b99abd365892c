package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/protocol"
)

func init() { register(newRequestCmd) }

func newRequestCmd() *cobra.Command {
	var cf clientFlags
	var mf messageFlags
	var wait time.Duration
	var co coordFlags
	var fallback []string
	cmd := &cobra.Command{
		Use:   "request (--to AGENT | --capability KIND:NAME | --fallback A,B,...) --intent I [--payload JSON|@file] [--wait D] | request -f DOC",
		Short: "Send a request through the running node and print the response",
		Long: `request sends a request like 'send' and waits up to --wait for the correlated response,
which it prints (-o yaml or json prints the whole signed document). No response in time is a
TIMEOUT error and exit code 1, and the request is never delivered after that: it lives no
longer than --wait. A --file document of another draft (IaCP 1.0, ElizaOS, ACP v2)
is answered in that draft, printed as the node returns it.

--capability KIND:NAME asks "an agent with this capability": the node picks one from discovery,
ranked by liveness and spread by free capacity, and fails over to the next when one refuses,
times out or has an open circuit. --fallback A,B,... asks the agents in that order until one
answers. --attempts retries each agent on a retryable error; --timeout bounds each attempt.
The table lists the candidates tried before the one that answered (docs/coordination.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if co.capability != "" || len(fallback) > 0 {
				return coordRequest(cmd, &cf, &mf, &co, fallback, wait)
			}
			doc, err := mf.foreignDocument(cmd.InOrStdin())
			if err != nil {
				return err
			}
			if doc != nil {
				return requestForeign(cmd, &cf, doc, mf.dialect, wait)
			}
			return requestIACP(cmd, &cf, &mf, wait)
		},
	}
	addClientFlags(cmd, &cf)
	addMessageFlags(cmd, &mf)
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Second, "how long to wait for the response")
	addCoordFlags(cmd, &co, true)
	cmd.Flags().StringSliceVar(&fallback, "fallback", nil, "ordered candidate agents, comma-separated: the first that answers")
	return cmd
}

// requestForeign sends doc, a document of another draft, as a request, and prints the answer as
// the node returns it, in that draft.
func requestForeign(cmd *cobra.Command, cf *clientFlags, doc []byte, dialect string, wait time.Duration) error {
	return cf.withClient(func(c *apiclient.Client) error {
		answer, err := c.RequestDocument(cmd.Context(), doc, dialect, wait)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(cmd.OutOrStdout(), string(answer))
		return err
	})
}

// requestIACP sends the IACP request the flags describe and prints the response.
func requestIACP(cmd *cobra.Command, cf *clientFlags, mf *messageFlags, wait time.Duration) error {
	m, err := mf.message(cmd.InOrStdin(), protocol.TypeRequest)
	if err != nil {
		return err
	}
	return cf.withClient(func(c *apiclient.Client) error {
		am, err := wire(m)
		if err != nil {
			return err
		}
		ar, err := c.RequestWith(cmd.Context(), am, wait, apiclient.SendOptions{QueueUnknown: mf.queueUnknown})
		if err != nil {
			return err
		}
		resp, err := protocol.DecodeJSON(ar.Raw)
		if err != nil {
			return err
		}
		return cf.print(cmd.OutOrStdout(), resp, func(tw *tabwriter.Writer) {
			status, _ := protocol.StatusOf(resp)
			fmt.Fprintf(tw, "FROM\t%s\nSTATUS\t%s\nCORRELATION\t%s\nPAYLOAD\t%s\n",
				resp.Envelope.Sender.AgentID, orDash(status), resp.Envelope.CorrelationID, resp.Message.Payload)
		})
	})
}
