package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/iacp-node/iacp-node/dialect"
	"github.com/iacp-node/iacp-node/protocol"
)

// NoNodeError says that no node serves the API where the client looked.
type NoNodeError struct {
	DataDir string
	Addr    string
	Err     error
}

func (e *NoNodeError) Error() string {
	if e.DataDir != "" {
		return fmt.Sprintf("no node is running with data dir %s: start one with `iacp-node run --data-dir %s`", e.DataDir, e.DataDir)
	}
	return fmt.Sprintf("no node is answering at %s: start one with `iacp-node run`, or check --api", e.Addr)
}

func (e *NoNodeError) Unwrap() error { return e.Err }

// APIError is an error answer of the API: the HTTP status and the IACP error it carries. It
// matches the protocol sentinels: errors.Is(err, protocol.ErrTimeout).
type APIError struct {
	Status int
	Err    *protocol.Error
}

func (e *APIError) Error() string       { return fmt.Sprintf("%s (HTTP %d)", e.Err.Error(), e.Status) }
func (e *APIError) Unwrap() error       { return e.Err }
func (e *APIError) Code() protocol.Code { return e.Err.Code }

// ErrAnswerTooLarge is returned by the Client's calls when an answer is larger than the
// client reads (WithAnswerLimit); the error says which call and what to do.
var ErrAnswerTooLarge = errors.New("api: the answer is larger than the client reads")

// DefaultAnswerLimit bounds the answers a Client reads: 17 MiB, one message of the default
// max_message_bytes (16 MiB, IaCP 1.0 section 10) and 1 MiB for the JSON around it. An inbox
// page is larger only when it holds a single larger message (its budget, ?max_bytes=, is
// kept under the limit).
const DefaultAnswerLimit = protocol.DefaultMaxMessageBytes + 1<<20

// inboxPageSlack is what an inbox page adds to its messages' JSON: the document around them
// and a comma between two (at most 1000 a page). The page budget the client asks for leaves
// this much of its answer limit free.
const inboxPageSlack = 64 << 10

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithAnswerLimit bounds the answers the client reads (default DefaultAnswerLimit, at least
// 1 MiB). Raise it for a node whose max_message_bytes (in its status) is larger than 16 MiB.
func WithAnswerLimit(n int64) ClientOption {
	return func(c *Client) { c.limit = max(n, 1<<20) }
}

// Client talks to a node's local API. It is safe for concurrent use.
type Client struct {
	base    string
	token   string
	dataDir string
	limit   int64
	hc      *http.Client
}

// NewClient returns a client of the API at addr (host:port or an http:// URL) with token.
func NewClient(addr, token string, opts ...ClientOption) *Client {
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	c := &Client{base: strings.TrimRight(base, "/"), token: token, limit: DefaultAnswerLimit, hc: &http.Client{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Dial returns a client of the node that runs with dataDir, from its api.addr and api.token.
// When no node runs there it returns a *NoNodeError that says how to start one.
func Dial(dataDir string, opts ...ClientOption) (*Client, error) {
	addr, err := ReadAddr(dataDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &NoNodeError{DataDir: dataDir, Err: err}
	}
	if err != nil {
		return nil, err
	}
	tok, err := ReadToken(dataDir)
	if err != nil {
		return nil, fmt.Errorf("read the API token: %w", err)
	}
	c := NewClient(addr, tok, opts...)
	c.dataDir = dataDir
	return c, nil
}

// Base returns the API's base URL.
func (c *Client) Base() string { return c.base }

// Close releases idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// do sends one call and decodes a 2xx JSON answer into out (when not nil).
func (c *Client) do(ctx context.Context, method, path string, body []byte, ctype string, out any) error {
	resp, err := c.send(ctx, method, path, body, ctype, mediaJSON)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := c.readAnswer(resp, method, path)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return decodeError(resp.StatusCode, raw)
	}
	if out == nil {
		return nil
	}
	if m, ok := out.(**protocol.Message); ok {
		*m, err = protocol.DecodeJSON(raw)
		return err
	}
	return json.Unmarshal(raw, out)
}

// readAnswer reads an answer of at most the client's limit; a larger one is refused with
// ErrAnswerTooLarge, before reading when its Content-Length says so, and never parsed cut.
func (c *Client) readAnswer(resp *http.Response, method, path string) ([]byte, error) {
	tooLarge := func(size string) error {
		what, _, _ := strings.Cut(path, "?")
		hint := "raise the client's limit with api.WithAnswerLimit"
		if what == "/v1/inbox" {
			hint = "one message in the inbox is this large (the node's max_message_bytes is above the client's limit): " +
				"read it with a client whose limit is larger (api.WithAnswerLimit), or take it over the WebSocket binding"
		}
		return fmt.Errorf("%w: %s %s answered %s bytes, more than the %d this client reads: %s",
			ErrAnswerTooLarge, method, what, size, c.limit, hint)
	}
	if resp.ContentLength > c.limit {
		return nil, tooLarge(strconv.FormatInt(resp.ContentLength, 10))
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, c.limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) > c.limit {
		return nil, tooLarge("more than " + strconv.FormatInt(c.limit, 10))
	}
	return raw, nil
}

func (c *Client) send(ctx context.Context, method, path string, body []byte, ctype, accept string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Accept", accept)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil && errors.Is(err, syscall.ECONNREFUSED) {
		return nil, &NoNodeError{DataDir: c.dataDir, Addr: c.base, Err: err}
	}
	return resp, err
}

func decodeError(status int, raw []byte) error {
	var doc ErrorDoc
	if err := json.Unmarshal(raw, &doc); err != nil || doc.Error.Code == "" {
		return &APIError{Status: status, Err: &protocol.Error{Code: protocol.CodeInternalError,
			Message: fmt.Sprintf("HTTP %d: %s", status, strings.TrimSpace(string(raw)))}}
	}
	e := doc.Error.AsError()
	return &APIError{Status: status, Err: e}
}

// Send sends m (the node fills and signs what m leaves out) and returns once the recipient's
// node has it.
func (c *Client) Send(ctx context.Context, m *protocol.Message) (SendResult, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return SendResult{}, err
	}
	var res SendResult
	err = c.do(ctx, http.MethodPost, MessagePath, raw, mediaJSON, &res)
	return res, err
}

// SendQueued is Send with ?queue_unknown=true: a recipient nothing knows yet is queued for
// store-and-forward (status "queued") instead of refused with AGENT_NOT_FOUND.
func (c *Client) SendQueued(ctx context.Context, m *protocol.Message) (SendResult, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return SendResult{}, err
	}
	var res SendResult
	err = c.do(ctx, http.MethodPost, MessagePath+"?"+QueueUnknownParam+"=true", raw, mediaJSON, &res)
	return res, err
}

// CancelOutbox takes a queued message out of the outbox (DELETE /v1/outbox/{message_id}).
func (c *Client) CancelOutbox(ctx context.Context, messageID string) error {
	return c.do(ctx, http.MethodDelete, "/v1/outbox/"+url.PathEscape(messageID), nil, "", nil)
}

// SendDocument sends one JSON document of another draft (docs/dialects.md) as it is, in the
// dialect named (iacp-1.0, elizaos, acp-v2; "" lets the node recognise it), and returns once
// the recipient's node has it.
func (c *Client) SendDocument(ctx context.Context, doc []byte, dialect string) (SendResult, error) {
	var res SendResult
	err := c.do(ctx, http.MethodPost, MessagePath+dialectQuery("?", dialect), doc, mediaJSON, &res)
	return res, err
}

// RequestDocument sends one JSON request document of another draft, as SendDocument does,
// waits up to wait for the response, and returns it in the request's dialect.
func (c *Client) RequestDocument(ctx context.Context, doc []byte, dialect string, wait time.Duration) (json.RawMessage, error) {
	var answer json.RawMessage
	err := c.do(ctx, http.MethodPost, MessagePath+"?wait="+wait.String()+dialectQuery("&", dialect), doc, mediaJSON, &answer)
	return answer, err
}

func dialectQuery(sep, dialect string) string {
	if dialect == "" {
		return ""
	}
	return sep + DialectParam + "=" + url.QueryEscape(dialect)
}

// Request sends the request m and waits up to wait for its response. An `error` reply comes
// back as an *APIError with its code; no reply in time as TIMEOUT (HTTP 504).
func (c *Client) Request(ctx context.Context, m *protocol.Message, wait time.Duration) (*protocol.Message, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var resp *protocol.Message
	err = c.do(ctx, http.MethodPost, MessagePath+"?wait="+wait.String(), raw, mediaJSON, &resp)
	return resp, err
}

// Broadcast publishes an event to every agent.
func (c *Client) Broadcast(ctx context.Context, ev protocol.EventPayload) (SendResult, error) {
	raw, err := json.Marshal(ev)
	if err != nil {
		return SendResult{}, err
	}
	var res SendResult
	err = c.do(ctx, http.MethodPost, "/v1/broadcast", raw, mediaJSON, &res)
	return res, err
}

// Status returns the node's status.
func (c *Client) Status(ctx context.Context) (StatusDoc, error) {
	var d StatusDoc
	return d, c.do(ctx, http.MethodGet, "/v1/status", nil, "", &d)
}

// Agents returns the liveness table.
func (c *Client) Agents(ctx context.Context) (AgentsDoc, error) {
	var d AgentsDoc
	return d, c.do(ctx, http.MethodGet, "/v1/agents", nil, "", &d)
}

// Discover runs a capability query.
func (c *Client) Discover(ctx context.Context, q protocol.CapabilityQuery) (DiscoverDoc, error) {
	var d DiscoverDoc
	return d, c.do(ctx, http.MethodGet, "/v1/discover?"+QueryParams(q).Encode(), nil, "", &d)
}

// Resolve returns the record of an agent.
func (c *Client) Resolve(ctx context.Context, agentID string) (RecordDoc, error) {
	var d RecordDoc
	return d, c.do(ctx, http.MethodGet, "/v1/resolve/"+url.PathEscape(agentID), nil, "", &d)
}

// Peers returns the connected peers.
func (c *Client) Peers(ctx context.Context) (PeersDoc, error) {
	var d PeersDoc
	return d, c.do(ctx, http.MethodGet, "/v1/peers", nil, "", &d)
}

// Trust returns who may speak for which agent id on the node, and the recent conflicts.
func (c *Client) Trust(ctx context.Context) (TrustDoc, error) {
	var d TrustDoc
	return d, c.do(ctx, http.MethodGet, "/v1/trust", nil, "", &d)
}

// ForgetTrust forgets the pin of agentID, or every pin of peerID when agentID is "".
func (c *Client) ForgetTrust(ctx context.Context, agentID, peerID string) (ForgetResult, error) {
	var d ForgetResult
	body, err := json.Marshal(ForgetRequest{AgentID: agentID, PeerID: peerID})
	if err != nil {
		return d, err
	}
	return d, c.do(ctx, http.MethodPost, "/v1/trust/forget", body, mediaJSON, &d)
}

// Invite asks the mesh authority's node for a one-time invitation, bound to agentID when it
// is not "", valid for ttl (0: the node's default), whose certificate grants grants.
func (c *Client) Invite(ctx context.Context, agentID string, ttl time.Duration, grants ...string) (InviteDoc, error) {
	var d InviteDoc
	req := InviteRequest{AgentID: agentID, Grants: grants}
	if ttl > 0 {
		req.TTL = ttl.String()
	}
	body, err := json.Marshal(req)
	if err != nil {
		return d, err
	}
	return d, c.do(ctx, http.MethodPost, "/v1/trust/invites", body, mediaJSON, &d)
}

// Revoke asks the mesh authority's node to revoke target, an agent id or a certificate id,
// and returns the certificates revoked.
func (c *Client) Revoke(ctx context.Context, target string) (CertificatesDoc, error) {
	var d CertificatesDoc
	body, err := json.Marshal(RevokeRequest{Target: target})
	if err != nil {
		return d, err
	}
	return d, c.do(ctx, http.MethodPost, "/v1/trust/revoke", body, mediaJSON, &d)
}

// Certificates lists the certificates the mesh authority issued (its node only).
func (c *Client) Certificates(ctx context.Context) (CertificatesDoc, error) {
	var d CertificatesDoc
	return d, c.do(ctx, http.MethodGet, "/v1/trust/certificates", nil, "", &d)
}

// AuthToken obtains an A2ACP token for the node's agent from the mesh authority.
func (c *Client) AuthToken(ctx context.Context, req TokenRequest) (TokenDoc, error) {
	var d TokenDoc
	body, err := json.Marshal(req)
	if err != nil {
		return d, err
	}
	return d, c.do(ctx, http.MethodPost, AuthTokenPath, body, mediaJSON, &d)
}

// Outbox returns the durable outbox.
func (c *Client) Outbox(ctx context.Context) (OutboxDoc, error) {
	var d OutboxDoc
	return d, c.do(ctx, http.MethodGet, "/v1/outbox", nil, "", &d)
}

// Inbox returns the first page of the messages waiting with seq greater than after; with
// wait > 0 it long-polls while none waits. The page's budget fits the client's answer limit
// (DefaultInboxPageBytes by default); when doc.More is true, more messages wait: ask again
// with after = doc.NextAfter.
func (c *Client) Inbox(ctx context.Context, after uint64, wait time.Duration) (InboxDoc, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatUint(after, 10))
	}
	q.Set("max_bytes", strconv.FormatInt(min(DefaultInboxPageBytes, c.limit-inboxPageSlack), 10))
	q.Set(DialectParam, string(dialect.IACP)) // InboxItem.Message is IACP, whatever the agent speaks
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	var d InboxDoc
	return d, c.do(ctx, http.MethodGet, "/v1/inbox?"+q.Encode(), nil, "", &d)
}

// Ack takes a message out of the inbox.
func (c *Client) Ack(ctx context.Context, messageID string) error {
	return c.do(ctx, http.MethodPost, "/v1/inbox/"+url.PathEscape(messageID)+"/ack", nil, "", nil)
}

// Conversation lists conversation id from the node's audit log, the entries after audit seq
// after, at most limit (0: the server's default, 1000). Ask again with after = NextAfter to
// follow on.
func (c *Client) Conversation(ctx context.Context, id string, after uint64, limit int) (ConversationDoc, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatUint(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var d ConversationDoc
	return d, c.do(ctx, http.MethodGet, "/v1/conversations/"+url.PathEscape(id)+"?"+q.Encode(), nil, "", &d)
}

// Health calls /healthz (no token needed).
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	return h, c.do(ctx, http.MethodGet, "/healthz", nil, "", &h)
}

// Events follows the event stream until ctx ends or fn returns an error (returned as is).
func (c *Client) Events(ctx context.Context, f EventFilter, fn func(EventItem) error) error {
	q := url.Values{}
	if len(f.Kinds) > 0 {
		q.Set("kinds", strings.Join(f.Kinds, ","))
	}
	if f.AgentID != "" {
		q.Set("agent", f.AgentID)
	}
	if f.Group != "" {
		q.Set("group", f.Group)
	}
	resp, err := c.send(ctx, http.MethodGet, "/v1/events?"+q.Encode(), nil, "", "text/event-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return decodeError(resp.StatusCode, raw)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 2<<20) // one gossip message is at most 1 MiB
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var it EventItem
		if err := json.Unmarshal([]byte(data), &it); err != nil {
			return fmt.Errorf("event stream: %w", err)
		}
		if err := fn(it); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}

// coordCall posts a coordination request to path with ?wait=wait (0: the server's maximum).
func (c *Client) coordCall(ctx context.Context, path string, body any, wait time.Duration, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	if wait > 0 {
		path += "?wait=" + wait.String()
	}
	return c.do(ctx, http.MethodPost, path, raw, mediaJSON, out)
}

// CoordAny asks an agent with q.Capability (POST /v1/coord/any); a failure of every candidate
// is an *APIError whose detail lists them.
func (c *Client) CoordAny(ctx context.Context, q CoordRequest, wait time.Duration) (ResultDoc, error) {
	var d ResultDoc
	return d, c.coordCall(ctx, "/v1/coord/any", q, wait, &d)
}

// CoordFallback asks q.Agents in order, or q.Capability's providers, until one answers
// (POST /v1/coord/fallback).
func (c *Client) CoordFallback(ctx context.Context, q CoordRequest, wait time.Duration) (ResultDoc, error) {
	var d ResultDoc
	return d, c.coordCall(ctx, "/v1/coord/fallback", q, wait, &d)
}

// CoordScatter scatters q and returns the aggregate (POST /v1/coord/scatter); a rule not met
// is in the doc's Met and Error, not an error.
func (c *Client) CoordScatter(ctx context.Context, q CoordRequest, wait time.Duration) (GatherDoc, error) {
	var d GatherDoc
	return d, c.coordCall(ctx, "/v1/coord/scatter", q, wait, &d)
}

// CoordPipeline runs a pipeline (POST /v1/coord/pipeline); a failed step is in the doc's
// Error, not an error.
func (c *Client) CoordPipeline(ctx context.Context, q PipelineRequest, wait time.Duration) (PipelineDoc, error) {
	var d PipelineDoc
	return d, c.coordCall(ctx, "/v1/coord/pipeline", q, wait, &d)
}
