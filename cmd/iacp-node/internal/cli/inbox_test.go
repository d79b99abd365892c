package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// inboxOf starts two nodes and sends node 1's agent one message per payload size (a JSON
// object of about that many bytes), through the nodes. It returns node 1's data directory,
// node 1, and the message ids in order, once node 1's inbox holds them all.
func inboxOf(t *testing.T, sizes ...int) (string, *node.Node, []string) {
	t.Helper()
	t.Cleanup(noLeaks(t))
	// Durable delivery and the audit log off: they write every byte to disk, which listing
	// the inbox does not need.
	dirs, nodes := twoNodes(t, node.WithDurable(false), node.WithAudit(false, false))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var ids []string
	for i, size := range sizes {
		payload := `{"blob":"` + strings.Repeat(string(rune('a'+i)), size-12) + `"}`
		m, err := nodes[0].Builder().Request("test:cli:agent1", protocol.IntentNotify, json.RawMessage(payload))
		if err != nil {
			t.Fatal(err)
		}
		if err := nodes[0].Send(ctx, m); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.Envelope.MessageID)
	}
	for nodes[1].Inbox().Len() != len(sizes) {
		if ctx.Err() != nil {
			t.Fatal("the messages did not reach the inbox")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return dirs[1], nodes[1], ids
}

// lines splits output into its lines.
func lines(out string) []string { return strings.Split(strings.TrimSuffix(out, "\n"), "\n") }

// With two messages of the maximum size (16 MiB each) waiting, `iacp-node inbox --ack -o json`
// lists both, one JSON line each, following the inbox's pages, and takes both. (It used to
// fail with "unexpected end of JSON input": one answer held both, and the client parsed it
// cut at 16 MiB.)
func TestInbox_ListsAndTakesTwoMaxSizeMessages(t *testing.T) {
	dir, nd, ids := inboxOf(t, protocol.DefaultMaxMessageBytes-2048, protocol.DefaultMaxMessageBytes-2048)
	code, out, errOut := runIn(t, "", "inbox", "--data-dir", dir, "--ack", "-o", "json")
	ls := lines(out)
	if code != 0 || len(ls) != 2 {
		t.Fatalf("inbox --ack -o json: exit %d, %d lines, stderr %s", code, len(ls), errOut)
	}
	for i, l := range ls {
		if len(l) < protocol.DefaultMaxMessageBytes-2048 || !strings.HasPrefix(l, `{"envelope":`) || !strings.Contains(l[:512], ids[i]) {
			t.Fatalf("line %d (%d bytes) is not message %s: %.200s", i, len(l), ids[i], l)
		}
	}
	if n := nd.Inbox().Len(); n != 0 {
		t.Fatalf("inbox --ack left %d messages", n)
	}
}

// Two messages of 4.3 MiB do not fit one page (8 MiB): every output format lists both, in
// order, and --ack -o yaml takes both.
func TestInbox_EveryOutputFollowsThePages(t *testing.T) {
	dir, nd, ids := inboxOf(t, 4400<<10, 4400<<10)
	count := map[string]func(string) int{
		"json":  func(out string) int { return len(lines(out)) },
		"table": func(out string) int { return len(lines(out)) },
		"yaml":  func(out string) int { return strings.Count(out, "\n---\n") },
	}
	for _, args := range [][]string{{"-o", "json"}, {"-o", "table"}, {"-o", "yaml", "--ack"}} {
		code, out, errOut := runIn(t, "", append([]string{"inbox", "--data-dir", dir}, args...)...)
		if n := count[args[1]](out); code != 0 || n != 2 || strings.Index(out, ids[0]) > strings.Index(out, ids[1]) {
			t.Fatalf("inbox %v: exit %d, %d messages, stderr %s", args, code, n, errOut)
		}
	}
	if n := nd.Inbox().Len(); n != 0 {
		t.Fatalf("inbox --ack left %d messages", n)
	}
}
