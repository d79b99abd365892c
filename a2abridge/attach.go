package a2abridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// AttachOptions configure Attach. The zero value takes the agent id from the card and waits
// DefaultWait for each A2A call.
type AttachOptions struct {
	// AgentID is the id the A2A agent takes in the mesh. Default: the id the node options
	// set, else DefaultAgentID(card).
	AgentID string
	// Wait bounds one A2A call. Default DefaultWait; a request's own TTL bounds it too.
	Wait time.Duration
	// HTTPClient makes the A2A calls. Default: a client without a timeout of its own (Wait
	// bounds each call).
	HTTPClient *http.Client
}

// Attachment is a node whose agent is an external A2A agent. Close it when done.
type Attachment struct {
	n    *node.Node
	card *a2a.AgentCard
	cl   *a2aclient.Client
	hc   *http.Client
	wait time.Duration
}

// MaxCardBytes bounds an A2A agent card the bridge reads.
const MaxCardBytes = 1 << 20

// FetchCard fetches the A2A agent card at url: the card's own URL, or a base URL under which
// it is at /.well-known/agent-card.json. The card may be A2A 1.0's (supportedInterfaces) or
// 0.3's (url, preferredTransport, additionalInterfaces), which FetchCard reads as the 1.0
// interfaces it names. A card larger than MaxCardBytes is refused.
func FetchCard(ctx context.Context, url string, hc *http.Client) (*a2a.AgentCard, error) {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	bounded := *hc
	bounded.Transport = limitedBodies{rt: hc.Transport, limit: MaxCardBytes}
	r := &agentcard.Resolver{Client: &bounded, CardParser: a2av0.NewAgentCardParser()}
	card, err := r.Resolve(ctx, url, agentcard.WithPath(""))
	if err != nil || len(card.SupportedInterfaces) == 0 {
		card, err = r.Resolve(ctx, url)
	}
	if err != nil {
		return nil, fmt.Errorf("A2A card at %s: %w", url, err)
	}
	if len(card.SupportedInterfaces) == 0 {
		return nil, fmt.Errorf("A2A card at %s names no interface to call the agent at: neither supportedInterfaces (A2A 1.0) nor url and preferredTransport (A2A 0.3)", url)
	}
	return card, nil
}

// limitedBodies reads at most limit bytes of each answer's body: what is beyond fails the
// read.
type limitedBodies struct {
	rt    http.RoundTripper
	limit int64
}

func (l limitedBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	rt := l.rt
	if rt == nil {
		rt = http.DefaultTransport
	}
	resp, err := rt.RoundTrip(r)
	if err == nil {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: l.limit}
	}
	return resp, err
}

// limitedBody fails a read past its limit, so that a larger document is refused, not cut.
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("the answer is larger than %d bytes", MaxCardBytes)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// clientOf is an A2A client of card over hc: A2A 1.0 over JSON-RPC or HTTP+JSON, or 0.3 over
// JSON-RPC, the newest the card offers.
func clientOf(ctx context.Context, card *a2a.AgentCard, hc *http.Client) (*a2aclient.Client, error) {
	return a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc),
		a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: hc}))
}

// Attach starts a node (node.New with opts) whose agent is the A2A agent of card: its manifest
// is ManifestOf(card), published in discovery like any agent's, and every IACP request to it
// (handoff, negotiate, or any custom intent; query and health the node answers itself) becomes
// an A2A message/send to the card's endpoint, whose result becomes the IACP answer.
func Attach(ctx context.Context, card *a2a.AgentCard, o AttachOptions, opts ...node.Option) (*Attachment, error) {
	if o.Wait == 0 {
		o.Wait = DefaultWait
	}
	if o.Wait < 0 || o.Wait > MaxWait {
		return nil, fmt.Errorf("a2a attach: wait %s: want 0 (the default, %s) up to %s", o.Wait, DefaultWait, MaxWait)
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{}}
	}
	cl, err := clientOf(ctx, card, hc)
	if err != nil {
		return nil, fmt.Errorf("a2a attach: a client of %s: %w", card.SupportedInterfaces[0].URL, err)
	}
	opts = append(opts, func(c *node.Config) error {
		id := o.AgentID
		if id == "" {
			id = c.AgentID
		}
		if id == "" {
			id = DefaultAgentID(card)
		}
		c.AgentID, c.Manifest = id, ManifestOf(id, card)
		return nil
	})
	n, err := node.New(opts...)
	if err != nil {
		cl.Destroy()
		return nil, err
	}
	a := &Attachment{n: n, card: card, cl: cl, hc: hc, wait: o.Wait}
	n.Handle(protocol.IntentHandoff, a.handle)
	n.Handle(protocol.IntentNegotiate, a.handle)
	n.HandleOther(a.handle)
	return a, nil
}

// Node returns the attached agent's node.
func (a *Attachment) Node() *node.Node { return a.n }

// Card returns the A2A agent's card.
func (a *Attachment) Card() *a2a.AgentCard { return a.card }

// Close stops the node (its handlers' calls in flight finish first) and the A2A client.
func (a *Attachment) Close() error {
	err := a.n.Close()
	a.cl.Destroy()
	a.hc.CloseIdleConnections()
	return err
}

// handle answers one IACP request with the A2A agent's result; other messages (events,
// notifications, late answers) are dropped: the A2A agent has no inbox.
func (a *Attachment) handle(ctx context.Context, r *node.Request) error {
	if r.Msg.Message.Type != protocol.TypeRequest {
		return nil
	}
	msg, err := messageOf(r.Msg)
	if err != nil {
		return r.Fail(err)
	}
	ctx, cancel := context.WithTimeout(ctx, a.wait)
	defer cancel()
	ctx, cancelTTL := context.WithDeadline(ctx, r.Msg.Expires())
	defer cancelTTL()
	res, err := a.cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		return r.Fail(errorOfCall(err))
	}
	status, body, err := answerOf(res)
	if err != nil {
		return r.Fail(err)
	}
	return r.Reply(status, body)
}

// messageOf is the A2A message an IACP request becomes: its payload's parts (PartsOf), the
// A2A ids it carries under "a2a" (a conversation an A2A client began through an inbound
// bridge), and the IACP ids and intent as metadata.
func messageOf(m *protocol.Message) (*a2a.Message, error) {
	payload, err := decode(m)
	if err != nil {
		return nil, err
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, PartsOf(payload, false)...)
	if ids, ok := payload[PayloadKey].(map[string]any); ok {
		msg.ContextID, _ = ids["context_id"].(string)
	}
	msg.Metadata = map[string]any{IntentKey: string(m.Message.Intent), "iacp_message_id": m.Envelope.MessageID,
		"iacp_from": m.Envelope.Sender.AgentID}
	return msg, nil
}

// answerOf is the IACP answer of an A2A result: a message, or a completed task's artifacts,
// is accepted with their parts as the payload; a task that needs input (or auth), or is not
// done yet, is pending; a rejected task is rejected; a failed or canceled task an error.
func answerOf(res a2a.SendMessageResult) (status string, body map[string]any, err error) {
	switch res := res.(type) {
	case *a2a.Message:
		body = PayloadOf(res.Parts)
		body[PayloadKey] = map[string]any{"message_id": res.ID, "context_id": res.ContextID}
		return protocol.ResponseAccepted, body, nil
	case *a2a.Task:
		return answerOfTask(res)
	}
	return "", nil, protocol.Errorf(protocol.CodeInternalError, "the A2A agent answered %T, neither a message nor a task", res)
}

func answerOfTask(t *a2a.Task) (status string, body map[string]any, err error) {
	var parts []*a2a.Part
	for _, art := range t.Artifacts {
		parts = append(parts, art.Parts...)
	}
	if t.Status.State != a2a.TaskStateCompleted && t.Status.Message != nil {
		parts = append(parts, t.Status.Message.Parts...)
	}
	body = PayloadOf(parts)
	body[PayloadKey] = map[string]any{"task_id": string(t.ID), "context_id": t.ContextID, "state": stateName(t.Status.State)}
	switch t.Status.State {
	case a2a.TaskStateCompleted:
		return protocol.ResponseAccepted, body, nil
	case a2a.TaskStateRejected:
		if _, ok := body["detail"]; !ok {
			body["detail"] = "the A2A agent rejected the task"
		}
		return protocol.ResponseRejected, body, nil
	case a2a.TaskStateFailed, a2a.TaskStateCanceled, a2a.TaskStateUnspecified:
		return "", nil, errorOfStatus(stateName(t.Status.State), t.Status)
	}
	return protocol.ResponsePending, body, nil // input-required, auth-required, submitted, working
}

// stateName is a task state as A2A 0.3 spelled it (completed, input-required), the names
// the IACP payloads carry: A2A 1.0's are TASK_STATE_COMPLETED, ...
func stateName(s a2a.TaskState) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(string(s), "TASK_STATE_")), "_", "-")
}

// errorOfStatus is the IACP error a failed A2A task's status message says: the code of its
// data part when it is one of ours (a bridge on the other side), else INTERNAL_ERROR with the
// message's text.
func errorOfStatus(what string, st a2a.TaskStatus) *protocol.Error {
	code, text := protocol.CodeInternalError, "the A2A task "+what
	if st.Message != nil {
		p := PayloadOf(st.Message.Parts)
		if c, ok := p["code"].(string); ok {
			if _, known := protocol.Lookup(protocol.Code(c)); known {
				code = protocol.Code(c)
			}
		}
		if m, ok := p["message"].(string); ok && m != "" {
			text += ": " + m
		} else if t, ok := p["text"].(string); ok && t != "" {
			text += ": " + t
		}
	}
	return protocol.Errorf(code, "%s", text)
}

// errorOfCall maps the error of an A2A call to an IACP error: JSON-RPC errors by their meaning,
// a context's end to TIMEOUT, anything else (the agent unreachable, a broken answer) to
// AGENT_NOT_FOUND, which a sender may retry.
func errorOfCall(err error) *protocol.Error {
	var code protocol.Code
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		code = protocol.CodeTimeout
	case errors.Is(err, a2a.ErrInvalidParams), errors.Is(err, a2a.ErrInvalidRequest), errors.Is(err, a2a.ErrParseError),
		errors.Is(err, a2a.ErrTaskNotFound), errors.Is(err, a2a.ErrTaskNotCancelable):
		code = protocol.CodePayloadInvalid
	case errors.Is(err, a2a.ErrMethodNotFound), errors.Is(err, a2a.ErrUnsupportedOperation),
		errors.Is(err, a2a.ErrUnsupportedContentType), errors.Is(err, a2a.ErrPushNotificationNotSupported),
		errors.Is(err, a2a.ErrVersionNotSupported), errors.Is(err, a2a.ErrExtensionSupportRequired):
		code = protocol.CodeCapabilityMismatch
	case errors.Is(err, a2a.ErrUnauthenticated), errors.Is(err, a2a.ErrUnauthorized):
		code = protocol.CodePermissionDenied
	case errors.Is(err, a2a.ErrInternalError), errors.Is(err, a2a.ErrServerError), errors.Is(err, a2a.ErrInvalidAgentResponse):
		code = protocol.CodeInternalError
	default:
		code = protocol.CodeAgentNotFound
	}
	return protocol.Errorf(code, "A2A call: %w", err)
}
