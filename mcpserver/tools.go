package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/iacp-node/iacp-node/apiclient"
)

// SendInput is the send tool's input.
type SendInput struct {
	To      string         `json:"to" jsonschema:"the recipient agent id, namespace:host:name"`
	Intent  string         `json:"intent,omitempty" jsonschema:"what the message is for: handoff (default), query, notify, negotiate, or a custom x-... intent"`
	Type    string         `json:"type,omitempty" jsonschema:"event (default), notification or request"`
	Payload map[string]any `json:"payload,omitempty" jsonschema:"the message payload, a JSON object"`
	// CorrelationID continues a conversation (an answer names its request's message_id).
	CorrelationID string `json:"correlation_id,omitempty" jsonschema:"the conversation or the message this one answers"`
	TTLSeconds    int64  `json:"ttl_seconds,omitempty" jsonschema:"how long the message may wait for delivery, in seconds (default the node's, 1 hour)"`
	QueueUnknown  bool   `json:"queue_unknown,omitempty" jsonschema:"queue the message even when no agent of that id is known yet (one that will join later); without it an unknown id fails at once with AGENT_NOT_FOUND"`
}

// RequestInput is the request tool's input.
type RequestInput struct {
	To          string         `json:"to" jsonschema:"the recipient agent id, namespace:host:name"`
	Intent      string         `json:"intent,omitempty" jsonschema:"handoff (default), query, negotiate, or a custom x-... intent"`
	Payload     map[string]any `json:"payload,omitempty" jsonschema:"the request payload, a JSON object"`
	WaitSeconds float64        `json:"wait_seconds,omitempty" jsonschema:"how long to wait for the answer, in seconds (default 30, at most 300)"`
}

// CancelInput is the cancel tool's input.
type CancelInput struct {
	MessageID string `json:"message_id" jsonschema:"the message_id that send answered with status queued"`
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
		return failure(err)
	}
	m.Message.Type = in.Type
	if m.Message.Type == "" {
		m.Message.Type = apiclient.TypeEvent
	}
	if m.Message.Type == apiclient.TypeEvent {
		if _, ok := in.Payload["event_type"]; !ok && m.Message.Intent != "handoff" {
			return failure(invalid("an event's payload needs event_type (what happened); add it, or send type request"))
		}
	}
	m.Envelope.CorrelationID, m.Envelope.TTLSeconds = in.CorrelationID, in.TTLSeconds
	return via(t, func(c *apiclient.Client) (apiclient.SendResult, error) {
		return c.SendWith(ctx, m, apiclient.SendOptions{QueueUnknown: in.QueueUnknown})
	})
}

func (t *tools) request(ctx context.Context, _ *mcp.CallToolRequest, in RequestInput) (*mcp.CallToolResult, Output, error) {
	m, err := message(in.To, in.Intent, in.Payload)
	if err != nil {
		return failure(err)
	}
	m.Message.Type = apiclient.TypeRequest
	wait, err := seconds("wait_seconds", in.WaitSeconds, DefaultWait)
	if err != nil {
		return failure(err)
	}
	return via(t, func(c *apiclient.Client) (map[string]any, error) {
		resp, err := c.Request(ctx, m, wait)
		if err != nil {
			return nil, err
		}
		return map[string]any{"from": resp.Envelope.Sender.AgentID, "message_id": resp.Envelope.MessageID,
			"correlation_id": resp.Envelope.CorrelationID, "type": resp.Message.Type, "payload": resp.Message.Payload}, nil
	})
}

func (t *tools) cancel(ctx context.Context, _ *mcp.CallToolRequest, in CancelInput) (*mcp.CallToolResult, Output, error) {
	if in.MessageID == "" {
		return failure(invalid("message_id is empty; give the message_id that send answered with"))
	}
	return via(t, func(c *apiclient.Client) (apiclient.CancelResult, error) { return c.CancelOutbox(ctx, in.MessageID) })
}

func (t *tools) discover(ctx context.Context, _ *mcp.CallToolRequest, in DiscoverInput) (*mcp.CallToolResult, Output, error) {
	q := apiclient.CapabilityQuery{Required: apiclient.CapabilitySet{Tools: in.Tools, Models: in.Models, Domains: in.Domains}}
	if q.Required.Empty() {
		return failure(invalid("the query names no capability; name at least one tool, model or domain"))
	}
	return via(t, func(c *apiclient.Client) (apiclient.DiscoverDoc, error) { return c.Discover(ctx, q) })
}

func (t *tools) resolve(ctx context.Context, _ *mcp.CallToolRequest, in ResolveInput) (*mcp.CallToolResult, Output, error) {
	if in.AgentID == "" {
		return failure(invalid("agent_id is empty; give an agent id, namespace:host:name"))
	}
	return via(t, func(c *apiclient.Client) (apiclient.RecordDoc, error) { return c.Resolve(ctx, in.AgentID) })
}

func (t *tools) agents(ctx context.Context, _ *mcp.CallToolRequest, _ NoInput) (*mcp.CallToolResult, Output, error) {
	return via(t, func(c *apiclient.Client) (apiclient.AgentsDoc, error) { return c.Agents(ctx) })
}

func (t *tools) outbox(ctx context.Context, _ *mcp.CallToolRequest, _ NoInput) (*mcp.CallToolResult, Output, error) {
	return via(t, func(c *apiclient.Client) (apiclient.OutboxDoc, error) { return c.Outbox(ctx) })
}

func (t *tools) broadcast(ctx context.Context, _ *mcp.CallToolRequest, in BroadcastInput) (*mcp.CallToolResult, Output, error) {
	if in.EventType == "" {
		return failure(invalid("event_type is empty; say what happened, e.g. build.done"))
	}
	ev := apiclient.EventPayload{EventType: in.EventType, Detail: in.Detail, Severity: in.Severity, Data: in.Data}
	return via(t, func(c *apiclient.Client) (apiclient.SendResult, error) { return c.Broadcast(ctx, ev) })
}

func (t *tools) ask(ctx context.Context, _ *mcp.CallToolRequest, in AskInput) (*mcp.CallToolResult, Output, error) {
	deadline, err := seconds("deadline_seconds", in.DeadlineSeconds, 2*time.Second)
	if err != nil {
		return failure(err)
	}
	req := apiclient.AskRequest{Group: in.Group, Intent: in.Intent, Deadline: deadline.String(), Count: in.Count, Expect: in.Expect}
	if in.Payload != nil {
		if req.Payload, err = json.Marshal(in.Payload); err != nil {
			return failure(invalid(fmt.Sprintf("payload does not encode as JSON (%v); give a JSON object", err)))
		}
	}
	return via(t, func(c *apiclient.Client) (apiclient.AskDoc, error) { return c.Ask(ctx, req) })
}

func (t *tools) inbox(ctx context.Context, _ *mcp.CallToolRequest, in InboxInput) (*mcp.CallToolResult, Output, error) {
	wait, err := seconds("wait_seconds", in.WaitSeconds, 0)
	if err != nil {
		return failure(err)
	}
	return via(t, func(c *apiclient.Client) (apiclient.InboxDoc, error) {
		page, err := c.Inbox(ctx, in.After, wait)
		if err != nil || !in.Ack {
			return page, err
		}
		for _, it := range page.Messages {
			if err := c.Ack(ctx, it.MessageID); err != nil {
				return page, err
			}
		}
		return page, nil
	})
}

func (t *tools) readAgents(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	c, err := t.client()
	if err != nil {
		return nil, fmt.Errorf("%s", errorText(err))
	}
	res, err := c.Agents(ctx)
	t.forget(c, err)
	return resource(req.Params.URI, res, err)
}

func (t *tools) readInbox(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	c, err := t.client()
	if err != nil {
		return nil, fmt.Errorf("%s", errorText(err))
	}
	res, err := c.Inbox(ctx, 0, 0)
	t.forget(c, err)
	return resource(req.Params.URI, res, err)
}

// message builds the unsigned message an agent posts: the node fills and signs the rest.
func message(to, intent string, payload map[string]any) (*apiclient.Message, error) {
	if to == "" {
		return nil, invalid("to is empty; give the recipient's agent id, namespace:host:name")
	}
	m := &apiclient.Message{}
	m.Envelope.Recipient.AgentID = to
	m.Message.Intent = intent
	if m.Message.Intent == "" {
		m.Message.Intent = "handoff"
	}
	if payload == nil {
		payload = map[string]any{}
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, invalid(fmt.Sprintf("payload does not encode as JSON (%v); give a JSON object", err))
	}
	m.Message.Payload = raw
	return m, nil
}

// seconds reads a wait in seconds named name: def when zero, at most MaxWait.
func seconds(name string, s float64, def time.Duration) (time.Duration, error) {
	if s == 0 {
		return def, nil
	}
	d := time.Duration(s * float64(time.Second))
	if s < 0 || d > MaxWait {
		return 0, invalid(fmt.Sprintf("%s is %g: it is 0 to %d seconds; give one in that range", name, s, int(MaxWait.Seconds())))
	}
	return d, nil
}
