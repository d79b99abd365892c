package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/workflow"
)

func init() { register(newWorkflowCmd) }

func newWorkflowCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workflow",
		Short: "Run durable workflows: steps with dependencies, coordinated by this node",
		Long: `workflow runs durable workflows through the running node (IaCP 1.0 workflow_start,
docs/coordination.md "Workflows"). A workflow is declared in YAML or JSON:

  workflow_id: release-42          # optional: default a new id
  workflow_name: release
  steps:
    - {id: build, agent: acme:ci:builder, payload: {ref: main}, timeout: 10m}
    - {id: test,  agent: acme:ci:tester, depends_on: [build], attempts: 3}
    - {id: scan,  agent: acme:sec:scanner, fallback: [acme:sec:scanner2], depends_on: [build]}
    - {id: ship,  capability: {kind: tool, name: deploy}, depends_on: [test, scan]}

Each step is a request (intent handoff unless given) to its agent (or to the agents discovery
finds with its capability), then to its fallbacks in order; its payload is its own plus "inputs", the results of the steps it depends on.
Independent steps run at once. An IaCP 1.0 workflow_start message (payload.execution_plan with
steps, dependencies {step: [steps]} and timeouts {step: duration}) is read as a declaration too.
The node keeps the workflow's state in its store: stopped or
killed, it resumes the workflow when it starts again, and no step that had reported a result
runs twice.`,
	}
	cmd.AddCommand(newWorkflowRunCmd(), newWorkflowStatusCmd(), newWorkflowListCmd(), newWorkflowCancelCmd())
	return cmd
}

func newWorkflowRunCmd() *cobra.Command {
	var cf clientFlags
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Start the workflow FILE declares (- for stdin) and wait for it",
		Long: `run starts the workflow FILE declares (YAML or JSON, - for stdin; see iacp-node workflow
--help), waits up to --wait for it to end and prints each step. It exits 0 when the workflow
completed, 1 when it failed or was cancelled, 3 when it is still running after --wait (it goes
on in the node: iacp-node workflow status ID).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			decl, err := readInput(cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			return cf.withClient(func(c *apiclient.Client) error {
				st, err := api.StartWorkflow(cmd.Context(), c, decl, wait)
				if err != nil {
					return err
				}
				return printWorkflow(cmd.OutOrStdout(), &cf, st)
			})
		},
	}
	addClientFlags(cmd, &cf)
	cmd.Flags().DurationVar(&wait, "wait", 5*time.Minute, "how long to wait for the workflow to end (0: start it and return)")
	return cmd
}

func newWorkflowStatusCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "Show a workflow's steps: state, agent, attempts and timing",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cf.withClient(func(c *apiclient.Client) error {
				st, err := api.Workflow(cmd.Context(), c, args[0])
				if err != nil {
					return err
				}
				return printWorkflow(cmd.OutOrStdout(), &cf, st)
			})
		},
	}
	addClientFlags(cmd, &cf)
	return cmd
}

func newWorkflowCancelCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Stop a running workflow; its steps not yet answered are cancelled",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cf.withClient(func(c *apiclient.Client) error {
				st, err := api.CancelWorkflow(cmd.Context(), c, args[0])
				if err != nil {
					return err
				}
				return printWorkflow(cmd.OutOrStdout(), &cf, st)
			})
		},
	}
	addClientFlags(cmd, &cf)
	return cmd
}

func newWorkflowListCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the workflows this node coordinates or coordinated, the latest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cf.withClient(func(c *apiclient.Client) error {
				l, err := api.Workflows(cmd.Context(), c)
				if err != nil {
					return err
				}
				return cf.print(cmd.OutOrStdout(), api.WorkflowList{Workflows: l}, func(tw *tabwriter.Writer) {
					fmt.Fprintln(tw, "ID\tNAME\tSTATUS\tSTEPS\tSTARTED")
					for _, st := range l {
						done := 0
						for _, s := range st.Steps {
							if s.Status == workflow.Completed {
								done++
							}
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\n", st.Spec.ID, orDash(st.Spec.Name), st.Status, done, len(st.Steps), st.Started.Format(time.RFC3339))
					}
				})
			})
		},
	}
	addClientFlags(cmd, &cf)
	return cmd
}

// printWorkflow prints st and says by the exit code how it stands (0 completed, 1 failed or
// cancelled, 3 still running).
func printWorkflow(out io.Writer, cf *clientFlags, st workflow.State) error {
	err := cf.print(out, st, func(tw *tabwriter.Writer) {
		fmt.Fprintf(tw, "WORKFLOW\t%s\t%s\n", st.Spec.ID, st.Status)
		fmt.Fprintln(tw, "STEP\tSTATUS\tAGENT\tATTEMPTS\tTOOK\tERROR")
		for _, s := range st.Steps {
			took := "-"
			if !s.Started.IsZero() && !s.Ended.IsZero() {
				took = s.Ended.Sub(s.Started).Round(time.Millisecond).String()
			}
			errText := "-"
			if s.Status == workflow.Failed || (s.Error != "" && s.Status != workflow.Completed) {
				errText = s.Error
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", s.ID, s.Status, orDash(s.Agent), s.Attempts, took, errText)
		}
	})
	switch {
	case err != nil:
		return err
	case st.Status == workflow.Failed || st.Status == workflow.Cancelled:
		return &exitError{code: 1, err: fmt.Errorf("workflow %s %s: %s", st.Spec.ID, st.Status, st.Error)}
	case st.Status == workflow.Running:
		return &exitError{code: 3, err: fmt.Errorf("workflow %s is still running: iacp-node workflow status %s", st.Spec.ID, st.Spec.ID)}
	}
	return nil
}
