package cli

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/store"
)

func init() { register(newStoreCmd) }

func newStoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Check and recover the node's durable store (outbox, inbox, seen ids), offline",
		Long: `store works on the durable store in <data-dir>/store/store.db: the outbox of messages waiting
for their receipt, the inbox of messages the agent has not taken yet, and the ids seen, which
keep delivery exactly-once across restarts. The node refuses to start on a damaged store and
names these commands. Both need the node stopped: they take the store's file lock.`,
	}
	cmd.AddCommand(newStoreCheckCmd(), newStoreRecoverCmd())
	return cmd
}

func storeDataDirFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVar(dst, "data-dir", envDataDir(), dataDirHelp)
}

func newStoreCheckCmd() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "check [--data-dir D]",
		Short: "Check the store file page by page and record by record, changing nothing",
		Long: `check reads the store without changing it: both meta pages, every page of every bucket,
bbolt's own consistency check, and every record, which must decode. It prints the records in
each bucket, the records of the inbox journal that the next start replays into it, and every
problem found (bucket, key, page, what is wrong). An intact store exits
0; a damaged one exits 2 (run 'iacp-node store recover' next); a store that cannot be read,
or that a running node holds, exits 1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, err := store.Check(filepath.Join(dataDir, "store"))
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "store: %s\n", rep.Path)
			printCounts(out, rep.Records)
			if rep.Journaled > 0 {
				fmt.Fprintf(out, "journal: %s the node's next start replays into the store (it skips what the store has already)\n", plural(rep.Journaled, "record"))
			}
			if rep.OK() {
				fmt.Fprintln(out, "ok: no damage found")
				return nil
			}
			fmt.Fprintf(out, "DAMAGED: %s\n", plural(len(rep.Problems), "problem"))
			for _, p := range rep.Problems {
				fmt.Fprintf(out, "  %s\n", p)
			}
			fmt.Fprintf(out, "with the node stopped, run 'iacp-node store recover --data-dir %s' to copy every readable message into a new store\n", dataDir)
			return &exitError{code: 2, err: fmt.Errorf("store %s is damaged (%s)", rep.Path, plural(len(rep.Problems), "problem"))}
		},
	}
	storeDataDirFlag(cmd, &dataDir)
	return cmd
}

func newStoreRecoverCmd() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "recover [--data-dir D]",
		Short: "Copy every readable message of a damaged store into a new one",
		Long: `recover copies every record it can read into a new store file: it walks every bucket, skipping
damaged pages, and reads the file page by page for records a damaged page hides. Outbox and
inbox messages are kept once per message id, with their seen ids; copies of messages already
delivered or taken are left out. The damaged file is kept beside the new one as
store.db.damaged-<UTC time>. It prints what was recovered and what could not be read, and
exits 0, or 2 when the damaged store gave nothing back; 1 when it could not run (a running
node holds the store, or the new file could not be written, in which case nothing changed).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, err := store.Recover(filepath.Join(dataDir, "store"))
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "recovered store: %s\ndamaged file kept as: %s\n", rep.Path, rep.DamagedPath)
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "  outbox\t%d messages\n  inbox\t%d messages\n  seen\t%d ids\n  gossip\t%d ids\n  approvals\t%d held messages\n",
				rep.Outbox, rep.Inbox, rep.Seen, rep.Gossip, rep.Approvals)
			_ = tw.Flush()
			if rep.FromRawPages > 0 {
				fmt.Fprintf(out, "%d of the messages were found page by page, outside the readable tree\n", rep.FromRawPages)
			}
			if rep.Stale > 0 {
				fmt.Fprintf(out, "%d old copies of messages already delivered or taken were left out\n", rep.Stale)
			}
			if len(rep.Unreadable) == 0 {
				fmt.Fprintln(out, "no damage found: the store was rewritten as it was")
				return nil
			}
			fmt.Fprintf(out, "could not read (%d):\n", len(rep.Unreadable))
			for _, p := range rep.Unreadable {
				fmt.Fprintf(out, "  %s\n", p)
			}
			if len(rep.Lost) > 0 {
				fmt.Fprintf(out, "lost: %d messages that the surviving indexes name could not be read:\n", len(rep.Lost))
				for _, id := range rep.Lost {
					fmt.Fprintf(out, "  %s\n", id)
				}
			}
			if rep.Outbox+rep.Inbox+rep.Seen+rep.Gossip+rep.Approvals == 0 {
				return &exitError{code: 2, err: errors.New("nothing could be recovered: the node will start with an empty store; the damaged file is kept")}
			}
			return nil
		},
	}
	storeDataDirFlag(cmd, &dataDir)
	return cmd
}

// printCounts prints the records of each bucket, in name order.
func printCounts(w io.Writer, counts map[string]int) {
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	slices.Sort(names)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, n := range names {
		fmt.Fprintf(tw, "  %s\t%d records\n", n, counts[n])
	}
	_ = tw.Flush()
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
