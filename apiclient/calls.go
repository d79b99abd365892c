package apiclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Paths and parameters of the IACP bindings (docs/api.md).
const (
	// MessagePath is the HTTP binding: POST a message here.
	MessagePath = "/.well-known/iacp/v1/message"
	// DialectParam names the draft of a posted document, or the one to hand messages in.
	DialectParam = "dialect"
	// QueueUnknownParam asks to queue a message for an agent nothing knows yet.
	QueueUnknownParam = "queue_unknown"
)

// DefaultInboxPageBytes is the byte budget of an inbox page the client asks for: 8 MiB.
const DefaultInboxPageBytes = 8 << 20

// inboxPageSlack is what an inbox page adds to its messages' JSON: the page's budget leaves
// this much of the client's answer limit free.
const inboxPageSlack = 64 << 10

// SendOptions are how a send treats its recipient.
type SendOptions struct {
	// QueueUnknown queues a message for an agent nothing knows yet (store-and-forward to an
	// agent that will join later) instead of failing with AGENT_NOT_FOUND.
	QueueUnknown bool
}

func (o SendOptions) query(sep string) string {
	if !o.QueueUnknown {
		return ""
	}
	return sep + QueueUnknownParam + "=true"
}

// Send sends m (the node fills and signs what m leaves out) and returns once the recipient's
// node has it (status accepted), or it is queued for a known recipient that cannot be reached
// now (status queued). A recipient nothing knows is AGENT_NOT_FOUND at once.
func (c *Client) Send(ctx context.Context, m *Message) (SendResult, error) {
	return c.SendWith(ctx, m, SendOptions{})
}

// SendWith is Send with options.
func (c *Client) SendWith(ctx context.Context, m *Message, o SendOptions) (SendResult, error) {
	var res SendResult
	return res, c.post(ctx, MessagePath+o.query("?"), m, &res)
}

// SendDocument sends one JSON document of another draft (docs/dialects.md) as it is, in the
// dialect named (iacp-1.0, elizaos, acp-v2; "" lets the node recognise it).
func (c *Client) SendDocument(ctx context.Context, doc []byte, dialect string) (SendResult, error) {
	var res SendResult
	return res, c.Do(ctx, http.MethodPost, MessagePath+dialectQuery("?", dialect), doc, MediaJSON, &res)
}

// RequestDocument sends one JSON request document of another draft, as SendDocument does,
// waits up to wait for the response, and returns it in the request's dialect.
func (c *Client) RequestDocument(ctx context.Context, doc []byte, dialect string, wait time.Duration) (json.RawMessage, error) {
	var answer json.RawMessage
	return answer, c.Do(ctx, http.MethodPost, MessagePath+"?wait="+wait.String()+dialectQuery("&", dialect), doc, MediaJSON, &answer)
}

func dialectQuery(sep, dialect string) string {
	if dialect == "" {
		return ""
	}
	return sep + DialectParam + "=" + url.QueryEscape(dialect)
}

// Request sends the request m and waits up to wait for its response; the request lives no
// longer than wait. An `error` reply comes back as an *APIError with its code; no reply in
// time as TIMEOUT (HTTP 504).
func (c *Client) Request(ctx context.Context, m *Message, wait time.Duration) (*Message, error) {
	return c.RequestWith(ctx, m, wait, SendOptions{})
}

// RequestWith is Request with options.
func (c *Client) RequestWith(ctx context.Context, m *Message, wait time.Duration, o SendOptions) (*Message, error) {
	var resp *Message
	return resp, c.post(ctx, MessagePath+"?wait="+wait.String()+o.query("&"), m, &resp)
}

// CancelOutbox takes a queued message out of the outbox (DELETE /v1/outbox/{message_id}):
// it is not sent again. A message the outbox does not hold is 404.
func (c *Client) CancelOutbox(ctx context.Context, messageID string) (CancelResult, error) {
	var d CancelResult
	return d, c.Do(ctx, http.MethodDelete, "/v1/outbox/"+url.PathEscape(messageID), nil, "", &d)
}

// Broadcast publishes an event to every agent.
func (c *Client) Broadcast(ctx context.Context, ev EventPayload) (SendResult, error) {
	var res SendResult
	return res, c.post(ctx, "/v1/broadcast", ev, &res)
}

// Ask runs a broadcast query (POST /v1/ask).
func (c *Client) Ask(ctx context.Context, req AskRequest) (AskDoc, error) {
	var d AskDoc
	return d, c.post(ctx, "/v1/ask", req, &d)
}

// get decodes the answer of GET path into out.
func (c *Client) get(ctx context.Context, path string, out any) error {
	return c.Do(ctx, http.MethodGet, path, nil, "", out)
}

// Status returns the node's status.
func (c *Client) Status(ctx context.Context) (StatusDoc, error) {
	var d StatusDoc
	return d, c.get(ctx, "/v1/status", &d)
}

// Agents returns the liveness table.
func (c *Client) Agents(ctx context.Context) (AgentsDoc, error) {
	var d AgentsDoc
	return d, c.get(ctx, "/v1/agents", &d)
}

// Discover runs a capability query.
func (c *Client) Discover(ctx context.Context, q CapabilityQuery) (DiscoverDoc, error) {
	var d DiscoverDoc
	return d, c.get(ctx, "/v1/discover?"+QueryParams(q).Encode(), &d)
}

// QueryParams is a capability query as GET /v1/discover's parameters.
func QueryParams(q CapabilityQuery) url.Values {
	v := url.Values{}
	add := func(k string, xs []string) {
		for _, x := range xs {
			v.Add(k, x)
		}
	}
	add("tool", q.Required.Tools)
	add("model", q.Required.Models)
	add("domain", q.Required.Domains)
	add("prefer_tool", q.Preferred.Tools)
	add("prefer_model", q.Preferred.Models)
	add("prefer_domain", q.Preferred.Domains)
	if q.Constraints.Locality != "" {
		v.Set("locality", q.Constraints.Locality)
	}
	if q.Constraints.MaxLatencyMs > 0 {
		v.Set("max_latency_ms", strconv.Itoa(q.Constraints.MaxLatencyMs))
	}
	return v
}

// Resolve returns the record of an agent.
func (c *Client) Resolve(ctx context.Context, agentID string) (RecordDoc, error) {
	var d RecordDoc
	return d, c.get(ctx, "/v1/resolve/"+url.PathEscape(agentID), &d)
}

// Peers returns the connected peers.
func (c *Client) Peers(ctx context.Context) (PeersDoc, error) {
	var d PeersDoc
	return d, c.get(ctx, "/v1/peers", &d)
}

// Outbox returns the durable outbox.
func (c *Client) Outbox(ctx context.Context) (OutboxDoc, error) {
	var d OutboxDoc
	return d, c.get(ctx, "/v1/outbox", &d)
}

// Inbox returns the first page of the messages waiting with seq greater than after, in
// IACP; with wait > 0 it long-polls while none waits. The page's budget fits the client's
// answer limit; when doc.More is true, more messages wait: ask again with after =
// doc.NextAfter.
func (c *Client) Inbox(ctx context.Context, after uint64, wait time.Duration) (InboxDoc, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatUint(after, 10))
	}
	q.Set("max_bytes", strconv.FormatInt(min(DefaultInboxPageBytes, c.limit-inboxPageSlack), 10))
	q.Set(DialectParam, "iacp") // InboxItem.Message is IACP, whatever the agent speaks
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	var d InboxDoc
	return d, c.get(ctx, "/v1/inbox?"+q.Encode(), &d)
}

// Ack takes a message out of the inbox.
func (c *Client) Ack(ctx context.Context, messageID string) error {
	return c.Do(ctx, http.MethodPost, "/v1/inbox/"+url.PathEscape(messageID)+"/ack", nil, "", nil)
}

// Health calls /healthz (no token needed).
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	return h, c.get(ctx, "/healthz", &h)
}
