package api

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// post sends body to the message endpoint of s and returns the status, headers and error doc.
func post(t *testing.T, s *Server, token, query, body string) (int, http.Header, ErrorDoc) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL()+MessagePath+query, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var doc ErrorDoc
	_ = json.Unmarshal(raw, &doc)
	return resp.StatusCode, resp.Header, doc
}

// Every error status of the binding, each with its IACP error document.
func TestE2E_ErrorStatuses(t *testing.T) {
	// Durable delivery off: with it on, a message to an unknown agent is queued (202) and
	// retried, and the outbox reports it.
	m := newAPIMesh(t, 3, meshOpts{node: func(int) []node.Option { return []node.Option{node.WithDurable(false)} }, server: func(i int) []Option {
		switch i {
		case 1:
			return []Option{WithRateLimit(0.001, 1)}
		case 2:
			return []Option{WithMaxBodyBytes(4096)}
		}
		return nil
	}})
	s0, s1, s2 := m.servers[0], m.servers[1], m.servers[2]
	ok := `{"envelope":{"recipient":{"agent_id":"` + agentName(2) + `"}},"message":{"type":"request","intent":"handoff","payload":{}}}`
	cases := []struct {
		name   string
		srv    *Server
		token  string
		query  string
		body   string
		status int
		code   protocol.Code
	}{
		{"no token", s0, "", "", ok, 401, protocol.CodeIdentityInvalid},
		{"wrong token", s0, "not-the-token-at-all", "", ok, 401, protocol.CodeIdentityInvalid},
		{"malformed JSON", s0, s0.Token(), "", `{"envelope":`, 400, protocol.CodePayloadInvalid},
		{"no recipient", s0, s0.Token(), "", `{"message":{"type":"request","intent":"handoff"}}`, 400, protocol.CodePayloadInvalid},
		{"unknown channel", s0, s0.Token(), "", strings.Replace(ok, `"agent_id"`, `"channel":"bogus","agent_id"`, 1), 400, protocol.CodeChannelUnknown},
		{"bad wait", s0, s0.Token(), "?wait=soon", ok, 400, protocol.CodePayloadInvalid},
		{"unknown agent", s0, s0.Token(), "", strings.Replace(ok, agentName(2), "test:api:nobody", 1), 404, protocol.CodeAgentNotFound},
		{"no response in time", s0, s0.Token(), "?wait=300ms", ok, 504, protocol.CodeTimeout},
		{"too large", s2, s2.Token(), "", strings.Replace(ok, `"payload":{}`, `"payload":{"x":"`+strings.Repeat("a", 5000)+`"}`, 1), 413, protocol.CodePayloadInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, _, doc := post(t, c.srv, c.token, c.query, c.body)
			if status != c.status || doc.Error.Code != c.code || doc.Error.Message == "" {
				t.Fatalf("status %d code %q (%q), want %d %s", status, doc.Error.Code, doc.Error.Message, c.status, c.code)
			}
		})
	}
	// 429: node 1's API allows a burst of one message; the second is refused with Retry-After.
	if status, _, doc := post(t, s1, s1.Token(), "", ok); status != http.StatusAccepted {
		t.Fatalf("first message: %d %+v", status, doc)
	}
	status, h, doc := post(t, s1, s1.Token(), "", ok)
	if status != http.StatusTooManyRequests || doc.Error.Code != protocol.CodeRateLimited || h.Get("Retry-After") == "" || !doc.Error.Retryable {
		t.Fatalf("second message: %d %+v Retry-After %q", status, doc, h.Get("Retry-After"))
	}
}

// Every registered code has a documented status, and the table is what docs/api.md says.
func TestStatusOf_EveryCode(t *testing.T) {
	want := map[protocol.Code]int{
		protocol.CodeVersionUnsupported: 400, protocol.CodePayloadInvalid: 400, protocol.CodeChannelUnknown: 400,
		protocol.CodeIdentityInvalid: 401, protocol.CodePermissionDenied: 403, protocol.CodeAgentNotFound: 404,
		protocol.CodeDuplicate: 409, protocol.CodeCapabilityMismatch: 422, protocol.CodeRateLimited: 429,
		protocol.CodeInternalError: 500, protocol.CodeTimeout: 504,
	}
	for _, info := range protocol.Codes() {
		w, ok := want[info.Code]
		if !ok {
			t.Fatalf("code %s has no row in the status table", info.Code)
		}
		if got := StatusOf(info.Code); got != w {
			t.Fatalf("%s -> %d, want %d", info.Code, got, w)
		}
	}
}

// A YAML alias bomb is refused with 413 as soon as its expansion passes the body
// limit, on both the message binding and the broadcast endpoint.
func TestE2E_YAMLAliasBombIs413(t *testing.T) {
	m := newAPIMesh(t, 1, meshOpts{server: func(int) []Option { return []Option{WithMaxBodyBytes(1 << 20)} }})
	var b strings.Builder
	b.WriteString("envelope: {recipient: {agent_id: a:b:c}}\nmessage:\n  payload:\n    event_type: x\n    big: &big \"")
	b.WriteString(strings.Repeat("x", 64<<10))
	b.WriteString("\"\n    copies: [")
	b.WriteString(strings.Repeat("*big, ", 2000))
	b.WriteString("*big]\n")
	bomb := b.String()
	for _, path := range []string{MessagePath, "/v1/broadcast"} {
		body := bomb
		if path == "/v1/broadcast" {
			body = strings.Replace(strings.Replace(bomb, "envelope: {recipient: {agent_id: a:b:c}}\nmessage:\n  payload:\n", "", 1), "\n    ", "\n", -1)
			body = strings.TrimPrefix(body, "    ")
		}
		req, _ := http.NewRequest(http.MethodPost, m.servers[0].URL()+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+m.servers[0].Token())
		req.Header.Set("Content-Type", "application/x-yaml")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var doc ErrorDoc
		_ = json.Unmarshal(raw, &doc)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || doc.Error.Code != protocol.CodePayloadInvalid {
			t.Fatalf("%s: status %d, %s; want 413 PAYLOAD_INVALID", path, resp.StatusCode, raw)
		}
	}
}
