package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// quickNodes leaves out the disk work that large messages make slow: durable delivery and
// the audit log.
func quickNodes(int) []node.Option {
	return []node.Option{node.WithDurable(false), node.WithAudit(false, false)}
}

// sendToInbox sends messages from node 0 to agent 1 through the nodes (the real path: signed,
// framed, validated, queued in node 1's inbox) and waits until node 1's inbox holds them all.
func sendToInbox(t *testing.T, m *apiMesh, payloads ...[]byte) []string {
	t.Helper()
	ctx := testCtx(t, 120*time.Second)
	var ids []string
	for _, p := range payloads {
		msg, err := m.nodes[0].Builder().Request(agentName(1), protocol.IntentNotify, json.RawMessage(p))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.nodes[0].Send(ctx, msg); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, msg.Envelope.MessageID)
	}
	testsupport.WaitFor(t, 60*time.Second, "messages in node 1's inbox", func() bool { return m.nodes[1].Inbox().Len() == len(payloads) })
	return ids
}

// maxPayload is a payload whose message is as large as the node takes: max_message_bytes
// (16 MiB) less the envelope and signature.
func maxPayload(c byte) []byte {
	return []byte(`{"blob":"` + strings.Repeat(string(c), protocol.DefaultMaxMessageBytes-2048) + `"}`)
}

// With two messages of the maximum size waiting (32 MiB), the inbox answers one per page
// (the default budget is 8 MiB, and a page holds at least one message), says that more wait
// and where the next page starts; the Go client reads each page whole and follows them. A
// client whose limit is smaller than a page says so, naming the limit and what to do,
// instead of parsing a cut answer.
func TestInbox_PagesTwoMaxSizeMessages(t *testing.T) {
	m := newAPIMesh(t, 2, meshOpts{node: quickNodes})
	ids := sendToInbox(t, m, maxPayload('a'), maxPayload('b'))
	// A guard against a hang, not a speed target: under -race on a busy 2-core machine,
	// rendering and parsing these 32 MiB takes a minute or more.
	ctx := testCtx(t, 5*time.Minute)
	s, c := m.servers[1], m.clients[1]

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/v1/inbox", nil)
	req.Header.Set("Authorization", "Bearer "+s.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(raw)) || len(raw) > apiclient.DefaultAnswerLimit {
		t.Fatalf("status %d, Content-Length %d for %d bytes; want 200, declared, within %d", resp.StatusCode, resp.ContentLength, len(raw), apiclient.DefaultAnswerLimit)
	}
	var first struct {
		Messages  []struct{ Seq uint64 } `json:"messages"`
		More      bool                   `json:"more"`
		NextAfter uint64                 `json:"next_after"`
	}
	if err := json.Unmarshal(raw, &first); err != nil {
		t.Fatal(err)
	}
	if len(first.Messages) != 1 || !first.More || first.NextAfter != first.Messages[0].Seq {
		t.Fatalf("first page: %d messages, more %v, next_after %d", len(first.Messages), first.More, first.NextAfter)
	}

	var got []*protocol.Message
	var after uint64
	for page := 1; ; page++ {
		doc, err := c.Inbox(ctx, after, 0)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		for _, it := range doc.Messages {
			got = append(got, decoded(t, it.Message))
		}
		after = doc.NextAfter
		if !doc.More {
			break
		}
	}
	if len(got) != 2 {
		t.Fatalf("the pages held %d messages, want 2", len(got))
	}
	for i, msg := range got {
		if msg.Envelope.MessageID != ids[i] || protocol.Verify(msg) != nil || len(msg.Message.Payload) != len(maxPayload('a')) {
			t.Fatalf("message %d: id %s (want %s), %d payload bytes, verify %v", i, msg.Envelope.MessageID, ids[i], len(msg.Message.Payload), protocol.Verify(msg))
		}
	}

	small := apiclient.New(s.Addr(), s.Token(), apiclient.WithAnswerLimit(1<<20))
	defer small.Close()
	_, err = small.Inbox(ctx, 0, 0)
	if !errors.Is(err, apiclient.ErrAnswerTooLarge) || !strings.Contains(err.Error(), strconv.Itoa(1<<20)) || !strings.Contains(err.Error(), "WithAnswerLimit") {
		t.Fatalf("a page larger than the client's limit: %v; want apiclient.ErrAnswerTooLarge naming the limit and what to do", err)
	}
}

// A page holds messages while their JSON fits ?max_bytes= (at least one), at most ?limit= of
// them; following next_after while more is true lists every message once, in order.
func TestInbox_PagesByBudgetAndLimit(t *testing.T) {
	m := newAPIMesh(t, 2, meshOpts{node: quickNodes})
	var payloads [][]byte
	for i := 0; i < 7; i++ {
		payloads = append(payloads, []byte(`{"n":`+strconv.Itoa(i)+`,"pad":"`+strings.Repeat("<&>", 300)+`"}`))
	}
	ids := sendToInbox(t, m, payloads...)
	s := m.servers[1]
	get := func(query string) (InboxDoc, []byte, int) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, s.URL()+"/v1/inbox?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+s.Token())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var doc InboxDoc
		_ = json.Unmarshal(raw, &doc)
		return doc, raw, resp.StatusCode
	}
	itemBytes := func(raw []byte) []int {
		var doc struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		var n []int
		for _, it := range doc.Messages {
			n = append(n, len(it))
		}
		return n
	}
	one, raw, _ := get("limit=1")
	size := itemBytes(raw)[0]
	if len(one.Messages) != 1 || !one.More {
		t.Fatalf("limit=1: %d messages, more %v", len(one.Messages), one.More)
	}
	if bytes.Contains(raw, []byte(`\u003c`)) {
		t.Fatal("the page escapes < again: messages are not byte for byte")
	}
	for _, tc := range []struct {
		query   string
		perPage int
	}{
		{"max_bytes=" + strconv.Itoa(2*size+size/2), 2},
		{"max_bytes=1", 1}, // smaller than any message: still one a page
		{"limit=3", 3},
		{"", 7},
	} {
		var seen []string
		var after uint64
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatalf("%q: the pages do not end", tc.query)
			}
			doc, raw, status := get(tc.query + "&after=" + strconv.FormatUint(after, 10))
			if status != http.StatusOK {
				t.Fatalf("%q: status %d: %s", tc.query, status, raw)
			}
			want := min(tc.perPage, len(ids)-len(seen))
			if len(doc.Messages) != want {
				t.Fatalf("%q after %d: %d messages, want %d", tc.query, after, len(doc.Messages), want)
			}
			for _, it := range doc.Messages {
				seen = append(seen, it.Message.Envelope.MessageID)
			}
			if doc.More != (len(seen) < len(ids)) {
				t.Fatalf("%q: more %v with %d of %d seen", tc.query, doc.More, len(seen), len(ids))
			}
			after = doc.NextAfter
			if !doc.More {
				break
			}
		}
		if strings.Join(seen, ",") != strings.Join(ids, ",") {
			t.Fatalf("%q listed %v, want %v", tc.query, seen, ids)
		}
	}
	if doc, _, _ := get("after=" + strconv.FormatUint(one.Messages[0].Seq+100, 10)); len(doc.Messages) != 0 || doc.More || doc.NextAfter != one.Messages[0].Seq+100 {
		t.Fatalf("an empty page: %+v; want no messages, more false, next_after = after", doc)
	}
	for _, q := range []string{"max_bytes=0", "max_bytes=" + strconv.Itoa(MaxInboxPageBytes+1), "limit=0", "limit=1001", "max_bytes=x"} {
		if _, raw, status := get(q); status != http.StatusBadRequest || !bytes.Contains(raw, []byte("must be an integer from")) {
			t.Fatalf("%s: %d %s; want 400 saying the range", q, status, raw)
		}
	}
}
