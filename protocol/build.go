package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// DefaultTTL is the ttl_seconds builders write when the caller sets none: one hour, the
// draft's example.
const DefaultTTL = time.Hour

// TimestampFormat is how builders write envelope.timestamp: RFC 3339, UTC, milliseconds.
const TimestampFormat = "2006-01-02T15:04:05.000Z07:00"

// Builder creates signed messages for one agent, so that no caller fills ids, timestamps or
// signatures by hand. A Builder is safe for concurrent use once built.
type Builder struct {
	agentID string
	signer  edSigner
	peerID  peer.ID
	pid     string // peerID in base58, as sender.peer_id carries it
	now     func() time.Time
	ttl     time.Duration
}

// WithDefaultTTL returns a copy of b that writes d as ttl_seconds when the caller sets none
// (d is rounded up to whole seconds; the zero or a negative d keeps b's).
func (b *Builder) WithDefaultTTL(d time.Duration) *Builder {
	c := *b
	if d > 0 {
		c.ttl = d
	}
	return &c
}

// DefaultTTL returns the ttl the builder writes when the caller sets none.
func (b *Builder) DefaultTTL() time.Duration { return b.ttl }

// NewBuilder returns a builder that signs as agentID with key (Ed25519) and stamps timestamps
// from now (time.Now when nil). Message ids are UUIDv7 from the wall clock whatever now is
// (see Seal).
func NewBuilder(agentID string, key crypto.PrivKey, now func() time.Time) (*Builder, error) {
	if err := ValidateAgentID(agentID); err != nil {
		return nil, err
	}
	if key == nil || key.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("builder: the identity key must be Ed25519")
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return &Builder{agentID: agentID, signer: newEdSigner(key), peerID: id, pid: id.String(), now: now, ttl: DefaultTTL}, nil
}

// AgentID returns the agent the builder signs for.
func (b *Builder) AgentID() string { return b.agentID }

// PeerID returns the peer id of the signing key.
func (b *Builder) PeerID() peer.ID { return b.peerID }

// Now returns the builder's clock reading.
func (b *Builder) Now() time.Time { return b.now() }

// Option adjusts a message before it is sealed.
type Option func(*Message)

// WithChannel sets recipient.channel (the default depends on the intent; see DefaultChannel).
func WithChannel(ch string) Option { return func(m *Message) { m.Envelope.Recipient.Channel = ch } }

// WithTTL sets ttl_seconds, rounded up to whole seconds.
func WithTTL(d time.Duration) Option {
	return func(m *Message) { m.Envelope.TTLSeconds = int64((d + time.Second - 1) / time.Second) }
}

// WithCorrelation sets correlation_id, to continue a conversation chain.
func WithCorrelation(id string) Option { return func(m *Message) { m.Envelope.CorrelationID = id } }

// Request builds a signed request to the agent `to`. payload may be nil, a struct, a map or
// json.RawMessage; it must encode to a JSON object. A new request starts its own chain: its
// correlation_id is its message_id unless WithCorrelation says otherwise.
func (b *Builder) Request(to string, intent Intent, payload any, opts ...Option) (*Message, error) {
	return b.build(to, TypeRequest, intent, payload, opts)
}

// Response builds a signed response to req: sent to req's sender, correlation_id = req's
// message_id, same intent and channel. status is one of the Response* constants; it is set as
// the payload's `status`, merged into body (nil or an object).
func (b *Builder) Response(req *Message, status string, body any, opts ...Option) (*Message, error) {
	payload, err := mergeObject(body, map[string]any{"status": status})
	if err != nil {
		return nil, err
	}
	opts = append([]Option{WithChannel(req.Envelope.Recipient.Channel), WithCorrelation(req.Envelope.MessageID)}, opts...)
	return b.build(req.Envelope.Sender.AgentID, TypeResponse, req.Message.Intent, payload, opts)
}

// Event builds a signed event; to may be Broadcast or a wildcard pattern.
func (b *Builder) Event(to string, intent Intent, ev EventPayload, opts ...Option) (*Message, error) {
	return b.build(to, TypeEvent, intent, ev, opts)
}

// Heartbeat builds a signed heartbeat to every agent on the health channel.
func (b *Builder) Heartbeat(hb HeartbeatPayload, opts ...Option) (*Message, error) {
	return b.build(Broadcast, TypeHeartbeat, IntentHealth, hb, opts)
}

// Error builds a signed error message in reply to orig, from err: its code is CodeOf(err), and
// an *Error's detail and retry delay are carried over. orig may be nil when the offending
// message could not be decoded; the error then goes to `to`.
func (b *Builder) Error(orig *Message, to string, err error, opts ...Option) (*Message, error) {
	p := ErrorPayload{Code: CodeOf(err), Message: err.Error(), Retryable: CodeOf(err).Retryable()}
	var e *Error
	if errors.As(err, &e) {
		p.Message, p.Detail = e.Message, e.Detail
		if p.Message == "" {
			p.Message = registry[e.Code].Description
		}
		if e.RetryAfter > 0 {
			p.RetryAfter = e.RetryAfter.Seconds()
		}
	}
	intent, channel := IntentNotify, ChannelNotification
	if orig != nil {
		to = orig.Envelope.Sender.AgentID
		if IntentAllowed(TypeError, orig.Message.Intent) {
			intent = orig.Message.Intent
		}
		if KnownChannel(orig.Envelope.Recipient.Channel) {
			channel = orig.Envelope.Recipient.Channel
		}
		opts = append([]Option{WithCorrelation(orig.Envelope.MessageID)}, opts...)
	}
	opts = append([]Option{WithChannel(channel)}, opts...)
	return b.build(to, TypeError, intent, p, opts)
}

func (b *Builder) build(to string, t Type, intent Intent, payload any, opts []Option) (*Message, error) {
	raw, err := encodePayload(payload)
	if err != nil {
		return nil, err
	}
	m := &Message{}
	m.Envelope.Recipient.AgentID = to
	m.Envelope.Recipient.Channel = DefaultChannel(intent)
	m.Message = Body{Type: t, Intent: intent, Payload: raw}
	for _, o := range opts {
		o(m)
	}
	if err := b.Seal(m); err != nil {
		return nil, err
	}
	return m, nil
}

// Seal fills what the node owns and the agent may leave out: version, message_id (a UUIDv7
// from github.com/google/uuid's NewV7, which reads the wall clock and crypto/rand, not the
// builder's clock), timestamp (from the builder's clock), ttl_seconds (DefaultTTL),
// correlation_id of a request (its own message_id), sender.agent_id and sender.peer_id; then
// it signs. Fields already set are kept, except the sender, which is always this builder's.
func (b *Builder) Seal(m *Message) error {
	env := &m.Envelope
	if env.Version == "" {
		env.Version = Version
	}
	if env.MessageID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return Errorf(CodeInternalError, "new message id: %w", err)
		}
		env.MessageID = id.String()
	}
	if env.Timestamp == "" {
		env.Timestamp = b.now().UTC().Format(TimestampFormat)
	}
	if env.TTLSeconds == 0 {
		env.TTLSeconds = int64(b.ttl / time.Second)
	}
	if env.CorrelationID == "" && m.Message.Type == TypeRequest {
		env.CorrelationID = env.MessageID
	}
	if env.Recipient.Channel == "" {
		env.Recipient.Channel = DefaultChannel(m.Message.Intent)
	}
	env.Sender.AgentID = b.agentID
	return sign(m, b.signer, b.pid)
}

func encodePayload(payload any) (json.RawMessage, error) {
	switch p := payload.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		return p, nil
	case []byte:
		return json.RawMessage(p), nil
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, Errorf(CodePayloadInvalid, "encode payload: %w", err)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, Errorf(CodePayloadInvalid, "payload must encode to a JSON object, not %.20s", raw)
	}
	return raw, nil
}

// mergeObject encodes body (nil or an object) and sets the given members on it. A nil body
// or a map is encoded once; any other body is encoded, and the members are written in front of
// its own (spliceMembers) or, when it has one of them or is not a strict JSON object, it is
// decoded into members and re-encoded.
func mergeObject(body any, set map[string]any) (json.RawMessage, error) {
	switch b := body.(type) {
	case nil:
		return json.Marshal(set)
	case map[string]any:
		merged := make(map[string]any, len(b)+len(set))
		for k, v := range b {
			merged[k] = v
		}
		for k, v := range set {
			merged[k] = v
		}
		return json.Marshal(merged)
	}
	raw, err := encodePayload(body)
	if err != nil {
		return nil, err
	}
	if out, ok := spliceMembers(raw, set); ok {
		return out, nil
	}
	return mergeByMap(raw, set)
}

// mergeByMap decodes the object raw into members, sets set's on it and re-encodes it.
func mergeByMap(raw []byte, set map[string]any) (json.RawMessage, error) {
	var members map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&members); err != nil || members == nil {
		return nil, Errorf(CodePayloadInvalid, "payload must be a JSON object")
	}
	for k, v := range set {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		members[k] = b
	}
	return json.Marshal(members)
}

// errClash stops spliceMembers' scan at a member the body already has.
var errClash = errors.New("the body has the member")

// spliceMembers returns the object raw, compacted, with set's members written in front of its
// own (in key order), when raw is one strict JSON object (RFC 8259, no duplicate names) that
// has none of set's names; ok is false otherwise. raw is scanned once, and copied as it is
// unless it has white space to drop. It spares a response's body the decoding and
// re-encoding that merging through a map costs (Builder.Response adds its status).
func spliceMembers(raw []byte, set map[string]any) (_ json.RawMessage, ok bool) {
	if len(set) == 0 {
		return nil, false
	}
	s := scanner{data: raw}
	s.ws()
	err := s.object(func(name string) error {
		if _, clash := set[name]; clash {
			return errClash
		}
		_, err := s.skip()
		return err
	})
	if err != nil || s.end() != nil {
		return nil, false
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]byte, 0, len(raw)+32*len(set))
	for _, k := range keys {
		v, err := json.Marshal(set[k])
		if err != nil {
			return nil, false
		}
		out = append(AppendJSONString(append(out, ','), k), ':')
		out = append(out, v...)
	}
	out[0] = '{'
	n := len(out)
	// The scan above read raw whole (and saw whether it has white space): no second one.
	out = appendValid(out, raw, s.spaced)
	if out[n+1] == '}' { // an empty body: its braces become the closing one
		return append(out[:n], '}'), true
	}
	out[n] = ','
	return out, true
}
