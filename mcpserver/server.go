// Package mcpserver exposes an iacp-node to MCP clients (the Model Context Protocol, which
// LLM applications use to call tools): the agent's node becomes a set of tools (send, request,
// discover, resolve, agents, broadcast, ask, inbox) and resources (the agents list, the inbox),
// each input with a JSON Schema. It is a client of the node's local API (api.Client), so it
// runs beside `iacp-node run`, over stdio or streamable HTTP (`iacp-node mcp`), and holds no
// state of its own.
package mcpserver

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/protocol"
)

// Resource URIs.
const (
	// AgentsURI is the agents list (GET /v1/agents).
	AgentsURI = "iacp://agents"
	// InboxURI is the first page of the inbox (GET /v1/inbox), nothing taken.
	InboxURI = "iacp://inbox"
)

// Defaults and bounds of the tools' inputs.
const (
	// DefaultWait is how long request waits for the answer when its input names no wait.
	DefaultWait = 30 * time.Second
	// MaxWait bounds a request's or an inbox read's wait: an MCP call should not hang.
	MaxWait = 5 * time.Minute
)

// New returns the MCP server of the node that c talks to; version is the server's version.
func New(c *api.Client, version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "iacp-node", Title: "IACP mesh node", Version: version},
		&mcp.ServerOptions{Instructions: instructions})
	t := &tools{c: c}
	mcp.AddTool(s, &mcp.Tool{Name: "send", Description: "Send a message to an agent of the mesh (no answer awaited): an event, a notification or a request whose answer arrives later in the inbox."}, t.send)
	mcp.AddTool(s, &mcp.Tool{Name: "request", Description: "Send a request to an agent of the mesh and wait for its answer (its response payload, or its error code)."}, t.request)
	mcp.AddTool(s, &mcp.Tool{Name: "discover", Description: "Find agents by capability (tools, models, domains) through the mesh's DHT."}, t.discover)
	mcp.AddTool(s, &mcp.Tool{Name: "resolve", Description: "Look up one agent's record: its peer, addresses and capability manifest."}, t.resolve)
	mcp.AddTool(s, &mcp.Tool{Name: "agents", Description: "List the agents this node hears heartbeats from, with their state (alive, busy, suspect, offline) and load."}, t.agents)
	mcp.AddTool(s, &mcp.Tool{Name: "broadcast", Description: "Broadcast an event to every agent of the mesh over gossip."}, t.broadcast)
	mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "Ask a capability group, or every agent, over gossip and collect their direct answers within a deadline: each answer, each error by agent, and the expected agents that did not answer."}, t.ask)
	mcp.AddTool(s, &mcp.Tool{Name: "inbox", Description: "Read the messages waiting for this agent, oldest first; with ack, take each one read so it is not offered again."}, t.inbox)
	s.AddResource(&mcp.Resource{URI: AgentsURI, Name: "agents", Title: "Agents of the mesh", MIMEType: "application/json",
		Description: "The agents this node hears, with their liveness state and load."}, t.readAgents)
	s.AddResource(&mcp.Resource{URI: InboxURI, Name: "inbox", Title: "Inbox", MIMEType: "application/json",
		Description: "The first page of messages waiting for this agent (nothing is taken)."}, t.readInbox)
	return s
}

const instructions = `This server is an IACP mesh node's agent. Agents are named namespace:host:name.
Use discover or agents to find one, request to ask it and wait for its answer, send for a
message that needs no answer now, and inbox to read (and with ack, take) what others sent.`

// tools holds the handlers; every call goes to the node's local API.
type tools struct{ c *api.Client }

// SendInput is the send tool's input.
type SendInput struct {
	To      string         `json:"to" jsonschema:"the recipient agent id, namespace:host:name"`
	Intent  string         `json:"intent,omitempty" jsonschema:"what the message is for: handoff (default), query, notify, negotiate, or a custom x-... intent"`
	Type    string         `json:"type,omitempty" jsonschema:"event (default), notification or request"`
	Payload map[string]any `json:"payload,omitempty" jsonschema:"the message payload, a JSON object"`
	// CorrelationID continues a conversation (an answer names its request's message_id).
	CorrelationID string `json:"correlation_id,omitempty" jsonschema:"the conversation or the message this one answers"`
	TTLSeconds    int64  `json:"ttl_seconds,omitempty" jsonschema:"how long the message may wait for delivery, in seconds (default the node's, 1 hour)"`
}

// RequestInput is the request tool's input.
type RequestInput struct {
	To          string         `json:"to" jsonschema:"the recipient agent id, namespace:host:name"`
	Intent      string         `json:"intent,omitempty" jsonschema:"handoff (default), query, negotiate, or a custom x-... intent"`
	Payload     map[string]any `json:"payload,omitempty" jsonschema:"the request payload, a JSON object"`
	WaitSeconds float64        `json:"wait_seconds,omitempty" jsonschema:"how long to wait for the answer, in seconds (default 30, at most 300)"`
}

// DiscoverInput is the discover tool's input.
type DiscoverInput struct {
	Tools   []string `json:"tools,omitempty" jsonschema:"tools every match must have"`
	Models  []string `json:"models,omitempty" jsonschema:"models every match must have"`
	Domains []string `json:"domains,omitempty" jsonschema:"domains every match must have"`
}

// ResolveInput is the resolve tool's input.
type ResolveInput struct {
	AgentID string `json:"agent_id" jsonschema:"the agent id to look up, namespace:host:name"`
}

// NoInput is the input of a tool that takes none.
type NoInput struct{}

// BroadcastInput is the broadcast tool's input.
type BroadcastInput struct {
	EventType string `json:"event_type" jsonschema:"what happened, e.g. build.done"`
	Detail    string `json:"detail,omitempty" jsonschema:"a human-readable detail"`
	Severity  string `json:"severity,omitempty" jsonschema:"info, warning or critical"`
	Data      any    `json:"data,omitempty" jsonschema:"any JSON data"`
}

// AskInput is the ask tool's input (a broadcast query, docs/coordination.md).
type AskInput struct {
	Group           string         `json:"group,omitempty" jsonschema:"the capability group to ask; empty asks every agent"`
	Intent          string         `json:"intent,omitempty" jsonschema:"query (default: every node answers with its capability manifest), handoff, negotiate, or a custom x-... intent"`
	Payload         map[string]any `json:"payload,omitempty" jsonschema:"the request payload, a JSON object"`
	DeadlineSeconds float64        `json:"deadline_seconds,omitempty" jsonschema:"how long to collect answers, in seconds (default 2, at most 300)"`
	Count           int            `json:"count,omitempty" jsonschema:"answer as soon as this many agents answered (default and at most 1024)"`
	Expect          []string       `json:"expect,omitempty" jsonschema:"agents expected to answer: stop once all did, and name those that did not"`
}

// InboxInput is the inbox tool's input.
type InboxInput struct {
	After       uint64  `json:"after,omitempty" jsonschema:"skip the messages up to this seq (next_after of an earlier read)"`
	WaitSeconds float64 `json:"wait_seconds,omitempty" jsonschema:"when nothing waits, wait this long for a message, in seconds (at most 300)"`
	Ack         bool    `json:"ack,omitempty" jsonschema:"take every message read, so it is not offered again"`
}

// Output is every tool's structured answer: the node's JSON document.
type Output = map[string]any

func (t *tools) send(ctx context.Context, _ *mcp.CallToolRequest, in SendInput) (*mcp.CallToolResult, Output, error) {
	m, err := message(in.To, in.Intent, in.Payload)
	if err != nil {
		return nil, nil, err
	}
	m.Message.Type = protocol.Type(in.Type)
	if m.Message.Type == "" {
		m.Message.Type = protocol.TypeEvent
	}
	if m.Message.Type == protocol.TypeEvent {
		if _, ok := in.Payload["event_type"]; !ok && m.Message.Intent != protocol.IntentHandoff {
			return nil, nil, fmt.Errorf("an event's payload needs event_type (what happened), or send type request")
		}
	}
	m.Envelope.CorrelationID, m.Envelope.TTLSeconds = in.CorrelationID, in.TTLSeconds
	res, err := t.c.Send(ctx, m)
	return answer(res, err)
}

func (t *tools) request(ctx context.Context, _ *mcp.CallToolRequest, in RequestInput) (*mcp.CallToolResult, Output, error) {
	m, err := message(in.To, in.Intent, in.Payload)
	if err != nil {
		return nil, nil, err
	}
	m.Message.Type = protocol.TypeRequest
	wait, err := seconds(in.WaitSeconds, DefaultWait)
	if err != nil {
		return nil, nil, err
	}
	resp, err := t.c.Request(ctx, m, wait)
	if err != nil {
		return answer(nil, err)
	}
	return answer(map[string]any{"from": resp.Envelope.Sender.AgentID, "message_id": resp.Envelope.MessageID,
		"correlation_id": resp.Envelope.CorrelationID, "type": resp.Message.Type, "payload": resp.Message.Payload}, nil)
}

func (t *tools) discover(ctx context.Context, _ *mcp.CallToolRequest, in DiscoverInput) (*mcp.CallToolResult, Output, error) {
	q := protocol.CapabilityQuery{Required: protocol.CapabilitySet{Tools: in.Tools, Models: in.Models, Domains: in.Domains}}
	if q.Required.Empty() {
		return nil, nil, fmt.Errorf("name at least one tool, model or domain to discover agents by")
	}
	res, err := t.c.Discover(ctx, q)
	return answer(res, err)
}

func (t *tools) resolve(ctx context.Context, _ *mcp.CallToolRequest, in ResolveInput) (*mcp.CallToolResult, Output, error) {
	if err := protocol.ValidateAgentID(in.AgentID); err != nil {
		return nil, nil, fmt.Errorf("agent_id: %w", err)
	}
	res, err := t.c.Resolve(ctx, in.AgentID)
	return answer(res, err)
}

func (t *tools) agents(ctx context.Context, _ *mcp.CallToolRequest, _ NoInput) (*mcp.CallToolResult, Output, error) {
	res, err := t.c.Agents(ctx)
	return answer(res, err)
}

func (t *tools) broadcast(ctx context.Context, _ *mcp.CallToolRequest, in BroadcastInput) (*mcp.CallToolResult, Output, error) {
	if in.EventType == "" {
		return nil, nil, fmt.Errorf("event_type is required: what happened, e.g. build.done")
	}
	res, err := t.c.Broadcast(ctx, protocol.EventPayload{EventType: in.EventType, Detail: in.Detail, Severity: in.Severity, Data: in.Data})
	return answer(res, err)
}

func (t *tools) ask(ctx context.Context, _ *mcp.CallToolRequest, in AskInput) (*mcp.CallToolResult, Output, error) {
	deadline, err := seconds(in.DeadlineSeconds, 2*time.Second)
	if err != nil {
		return nil, nil, err
	}
	req := api.AskRequest{Group: in.Group, Intent: in.Intent, Deadline: deadline.String(), Count: in.Count, Expect: in.Expect}
	if in.Payload != nil {
		if req.Payload, err = json.Marshal(in.Payload); err != nil {
			return nil, nil, fmt.Errorf("payload: %w", err)
		}
	}
	res, err := t.c.Ask(ctx, req)
	return answer(res, err)
}

func (t *tools) inbox(ctx context.Context, _ *mcp.CallToolRequest, in InboxInput) (*mcp.CallToolResult, Output, error) {
	wait, err := seconds(in.WaitSeconds, 0)
	if err != nil {
		return nil, nil, err
	}
	page, err := t.c.Inbox(ctx, in.After, wait)
	if err != nil || !in.Ack {
		return answer(page, err)
	}
	for _, it := range page.Messages {
		if err := t.c.Ack(ctx, it.MessageID); err != nil {
			return answer(nil, err)
		}
	}
	return answer(page, nil)
}

func (t *tools) readAgents(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	res, err := t.c.Agents(ctx)
	return resource(req.Params.URI, res, err)
}

func (t *tools) readInbox(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	res, err := t.c.Inbox(ctx, 0, 0)
	return resource(req.Params.URI, res, err)
}

// message builds the unsigned message an agent posts: the node fills and signs the rest.
func message(to, intent string, payload map[string]any) (*protocol.Message, error) {
	if err := protocol.ValidateAgentID(to); err != nil {
		return nil, fmt.Errorf("to: %w", err)
	}
	m := &protocol.Message{}
	m.Envelope.Recipient.AgentID = to
	m.Message.Intent = protocol.Intent(intent)
	if m.Message.Intent == "" {
		m.Message.Intent = protocol.IntentHandoff
	}
	if payload == nil {
		payload = map[string]any{}
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	m.Message.Payload = raw
	return m, nil
}

// seconds reads a wait in seconds: def when zero, at most MaxWait.
func seconds(s float64, def time.Duration) (time.Duration, error) {
	if s == 0 {
		return def, nil
	}
	d := time.Duration(s * float64(time.Second))
	if s < 0 || d > MaxWait {
		return 0, fmt.Errorf("a wait is 0 to %d seconds", int(MaxWait.Seconds()))
	}
	return d, nil
}

// answer is a tool's result: the node's document as structured content (the SDK also puts
// it, as JSON text, in the content), or the node's error as a tool error that names its
// IACP code, which the model reads and may act on.
func answer(v any, err error) (*mcp.CallToolResult, Output, error) {
	if err != nil {
		code := protocol.CodeOf(err)
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(code) + ": " + err.Error()}}}, nil, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	var out Output
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, nil, err
	}
	return nil, out, nil
}

// resource is a resource's contents: the node's document as JSON.
func resource(uri string, v any, err error) (*mcp.ReadResourceResult, error) {
	if err != nil {
		return nil, err
	}
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(raw)}}}, nil
}

// HTTPHandler serves s over MCP's streamable HTTP transport to clients that present token as
// a bearer token, the node's own API token: the handler reaches the node with that token's
// rights, so it asks for the same.
func HTTPHandler(s *mcp.Server, token string) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="iacp-node mcp"`)
			http.Error(w, "send the node's API token (<data-dir>/api.token) as Authorization: Bearer", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
