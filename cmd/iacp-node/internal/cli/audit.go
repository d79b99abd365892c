package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/audit"
)

func init() { register(newAuditCmd) }

func newAuditCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Check and read the node's tamper-evident audit log, offline",
		Long: `audit works on the audit log in <data-dir>/audit/ (audit-000001.jsonl, audit-000002.jsonl,
...): one JSON line per message sent, received, refused, expired, delivered or acknowledged.
Each line carries the SHA-256 of the line before it, so a changed, removed or reordered line
breaks the chain. The commands only read the files; they work with or without a running node.`,
	}
	cmd.AddCommand(newAuditVerifyCmd(), newAuditTailCmd())
	return cmd
}

func newAuditVerifyCmd() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "verify [--data-dir D]",
		Short: "Check the audit log's hash chain from the first line to the last",
		Long: `verify reads every audit file in order and checks that each line is an entry, that seqs
follow without gaps and that each prev is the hash of the line before, across files. An
intact chain prints "ok: N entries in M files, chain intact" and the head hash (keep a copy
elsewhere to anchor the chain) and exits 0. A broken chain prints the first broken file and
line and exits 2. Unreadable files exit 1.

When the node found a broken chain at start, it left the damaged file as it was and went on
in a new segment (a file that starts with a chain_broken entry): verify reports the break,
then where each new segment starts and whether it is intact, up to which seq, with its head.
When older files are gone, verify checks the first line kept against the anchor the
retention entry recorded, and warns when no retention entry records the removal.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir := filepath.Join(dataDir, "audit")
			if _, err := os.Stat(dir); err != nil {
				return fmt.Errorf("no audit log at %s (%w): pass --data-dir or set IACP_DATA_DIR", dir, err)
			}
			rep, err := audit.Verify(dir)
			var ce *audit.ChainError
			if err != nil && !errors.As(err, &ce) {
				return err
			}
			printAuditReport(cmd.OutOrStdout(), dir, rep)
			if ce != nil {
				return &exitError{code: 2, err: fmt.Errorf("audit chain broken at %s line %d", ce.File, ce.Line)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", envDataDir(), dataDirHelp)
	return cmd
}

// printAuditReport writes what Verify found: each segment and its break, then the head, the
// start of the log and a torn tail.
func printAuditReport(out io.Writer, dir string, rep audit.Report) {
	if rep.Broken == nil {
		fmt.Fprintf(out, "ok: %d entries in %d files, chain intact\n", rep.Entries, rep.Files)
		if rep.Entries > 0 {
			fmt.Fprintf(out, "head: seq %d sha256 %s\n", rep.LastSeq, rep.Head)
		}
	}
	for i, s := range rep.Segments {
		if s.StartReason != "" {
			label := "new segment"
			if rep.Broken == nil {
				label = "note: new segment"
			}
			fmt.Fprintf(out, "%s: %s starts at seq %d; the node began it when it found: %s\n",
				label, filepath.Join(dir, s.File), s.FirstSeq, s.StartReason)
		}
		switch {
		case s.Broken != nil:
			fmt.Fprintf(out, "BROKEN: %s line %d: %s\n", filepath.Join(dir, s.Broken.File), s.Broken.Line, s.Broken.Reason)
			fmt.Fprintf(out, "the %d entries before it in %d files are intact\n", s.Entries, s.Files)
		case i > 0 && rep.Broken != nil:
			fmt.Fprintf(out, "segment intact: %d entries, seq %d to %d, head sha256 %s\n", s.Entries, s.FirstSeq, s.LastSeq, s.Head)
		}
	}
	switch {
	case rep.UnrecordedRemoval:
		fmt.Fprintf(out, "warning: the log starts at seq %d, but no retention entry records removing the files before it: they were removed by hand\n", rep.FirstSeq)
	case rep.RemovedBy != nil:
		fmt.Fprintf(out, "note: the log starts at seq %d; retention removed the older files (recorded at %s line %d, seq %d)\n",
			rep.FirstSeq, rep.RemovedBy.File, rep.RemovedBy.Line, rep.RemovedBy.Entry.Seq)
	}
	if rep.TornTail {
		fmt.Fprintln(out, "note: the last line is incomplete (a write cut by a crash); the node drops and records it when it starts")
	}
}

func newAuditTailCmd() *cobra.Command {
	var (
		dataDir, output string
		follow          bool
		last            int
		from            uint64
	)
	cmd := &cobra.Command{
		Use:   "tail [--follow] [-o json|table] [-n N | --from SEQ] [--data-dir D]",
		Short: "Print the last audit entries, and follow new ones",
		Long: `tail prints the last N entries of the audit log (-n, default 20; 0 prints all), or every
entry from seq --from on, as a table or as JSON lines (-o json, one entry per line, as
stored). With --follow it keeps printing entries as the node appends them, across file
rotation, until interrupted. tail does not check the chain: use 'audit verify'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("-o %q: use json or table", output)
			}
			if last < 0 {
				return fmt.Errorf("-n %d: use 0 (all) or a positive count", last)
			}
			dir := filepath.Join(dataDir, "audit")
			if _, err := os.Stat(dir); err != nil && !follow {
				return fmt.Errorf("no audit log at %s (%w): pass --data-dir or set IACP_DATA_DIR", dir, err)
			}
			start := from
			if !cmd.Flags().Changed("from") && last > 0 {
				var head uint64
				if err := audit.Tail(cmd.Context(), dir, 0, false, func(e audit.Entry) error { head = e.Seq; return nil }); err != nil {
					return err
				}
				if head >= uint64(last) {
					start = head - uint64(last) + 1
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			if output == "table" {
				fmt.Fprintf(out, "%-7s %-20s %-9s %-36s %-24s %-24s %s\n", "SEQ", "TIME", "EVENT", "MESSAGE_ID", "FROM", "TO", "CODE")
			}
			err := audit.Tail(ctx, dir, start, follow, func(e audit.Entry) error { return printAuditEntry(out, output, e) })
			if follow && errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", envDataDir(), dataDirHelp)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new entries until interrupted")
	cmd.Flags().IntVarP(&last, "lines", "n", 20, "print the last N entries first (0: all)")
	cmd.Flags().Uint64Var(&from, "from", 0, "print entries from this seq on (overrides -n)")
	return cmd
}

func printAuditEntry(w io.Writer, format string, e audit.Entry) error {
	if format == "json" {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintf(w, "%-7d %-20s %-9s %-36s %-24s %-24s %s\n", e.Seq, e.Time.UTC().Format("2006-01-02T15:04:05Z"),
		e.Event, dash(e.MessageID), dash(e.From), dash(e.To), dash(string(e.Code)))
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
