package api

import (
	"encoding/json"
	"errors"
	"mime"
	"net/http"

	"github.com/iacp-node/iacp-node/dialect"
	"github.com/iacp-node/iacp-node/protocol"
)

// DialectParam names the dialect of a posted document: the query parameter ?dialect=, or the
// media type parameter (Content-Type: application/json; dialect=elizaos). Without either the
// node recognises the dialect by the document's members (dialect.Recognise), and a document
// it cannot place is read as IACP.
const DialectParam = "dialect"

// requestDialect returns the dialect the request names, "" when it names none.
func requestDialect(r *http.Request) (dialect.Dialect, error) {
	name := r.URL.Query().Get(DialectParam)
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if _, params, err := mime.ParseMediaType(ct); err == nil && params[DialectParam] != "" {
			if name != "" && name != params[DialectParam] {
				return "", errorf(protocol.CodePayloadInvalid, "?dialect=%s and the Content-Type's dialect=%s disagree: name one", name, params[DialectParam])
			}
			name = params[DialectParam]
		}
	}
	if name == "" {
		return "", nil
	}
	return dialect.Parse(name)
}

// agentDialect is the dialect to hand the agent its messages in: the one the request names
// (?dialect=), else the one the node's agent speaks (Config.Dialect).
func (s *Server) agentDialect(r *http.Request) (dialect.Dialect, error) {
	d, err := requestDialect(r)
	if err != nil || d != "" {
		return d, err
	}
	return s.n.Dialect(), nil
}

// decodeJSON reads a JSON document as the IACP message it is or maps to: in dialect d when
// the client named one, else the one it is recognised as (dialect.Recognise, skipped when
// dialect.MayBeForeign says it can only find IACP). A document of another draft goes through
// dialect.ToIACP, one that is IACP's own (or none the node can place) through the IACP
// decoder. It returns the dialect to answer in, also with an error: a document of another
// draft is refused in that draft (failIn).
func (s *Server) decodeJSON(d dialect.Dialect, body []byte) (*protocol.Message, dialect.Dialect, error) {
	var doc *dialect.Document
	var err error
	switch {
	case d == "" && dialect.MayBeForeign(body):
		// One parse both recognises and decodes; what it cannot place is read as IACP, whose
		// decoder says what is wrong with it.
		if found, got, rerr := dialect.DecodeRecognised(body); rerr == nil || found != dialect.IACP {
			d, doc, err = found, got, rerr
		}
	case d != "" && d != dialect.IACP:
		doc, err = dialect.Decode(d, body)
	}
	if err != nil {
		return nil, d, err
	}
	if doc == nil {
		m, err := protocol.DecodeJSONShared(body) // body is the request's, read for it alone: no copy
		return m, dialect.IACP, err
	}
	draft, err := dialect.ToIACP(doc, s.n.Now())
	if err != nil {
		return nil, d, err
	}
	m, err := draft.Message()
	if err != nil {
		return nil, d, err
	}
	s.book.answering(m, s.n.Now())
	return m, d, nil
}

// writeDialect answers m, the answer to req, in dialect d: as IACP (JSON or YAML by Accept)
// when d is IACP, else as the document of d that m maps to (dialect.FromIACP), always JSON.
// An answer correlated to req's message id is correlated, in d, to what req's sender named
// for its answers (dialect.AnswerCorrelation: ElizaOS reply_with, which became req's
// correlation id; ACP v2's command id): the sender's own conversation, as its draft says.
func writeDialect(w http.ResponseWriter, r *http.Request, status int, d dialect.Dialect, m, req *protocol.Message) error {
	if d == "" || d == dialect.IACP {
		write(w, r, status, m)
		return nil
	}
	if m.Envelope.CorrelationID == req.Envelope.MessageID {
		shown := *m
		shown.Envelope.CorrelationID = dialect.AnswerCorrelation(req, d)
		m = &shown
	}
	raw, err := dialect.FromIACP(m, d)
	if err != nil {
		return err
	}
	writeBytes(w, status, mediaJSON+"; "+DialectParam+"="+string(d), append(raw, '\n'))
	return nil
}

// render is an inbound message as the agent reads it in dialect d, and the dialect it is in:
// the document of d, or its IACP document when d is IACP or m has no shape in d (a broadcast
// event, say: the node refuses a direct message the agent's dialect cannot express, but an
// agent that asks for another dialect than its own still gets everything, in IACP, rather
// than nothing). An answer is correlated as d expects (answerBook).
func (s *Server) render(m *protocol.Message, d dialect.Dialect) ([]byte, dialect.Dialect, error) {
	if d != "" && d != dialect.IACP {
		if raw, err := dialect.FromIACP(s.book.shown(m, d, s.n.Now()), d); err == nil {
			s.book.noteShown(m, d)
			return raw, d, nil
		}
	}
	raw, err := protocol.EncodeJSON(m)
	return raw, dialect.IACP, err
}

// failIn answers err, the refusal of a document of dialect d, in d, with err's status: the
// error as d writes one (ElizaOS NOT_UNDERSTOOD for a document the node cannot read, FAILURE
// for one it could not deliver; an IaCP 1.0 error_response, INVALID_FORMAT and the rest by
// protocol's code table; an ACP v2 AgentResponse failed), correlated to the refused
// document's own id when it has one. What d has no shape for is answered as IACP, naming
// messageID (the IACP message's id, when it got one).
func (s *Server) failIn(w http.ResponseWriter, r *http.Request, err error, d dialect.Dialect, body []byte, messageID string) {
	if d == "" || d == dialect.IACP {
		s.fail(w, r, err, messageID)
		return
	}
	s.metrics.errors.WithLabelValues(string(protocol.CodeOf(err))).Inc()
	raw, derr := s.refusalIn(err, d, body)
	if derr != nil {
		writeError(w, r, err, messageID)
		return
	}
	status := StatusOf(protocol.CodeOf(err))
	var he *httpError
	if errors.As(err, &he) {
		status = he.status
	}
	writeBytes(w, status, mediaJSON+"; "+DialectParam+"="+string(d), append(raw, '\n'))
}

// refusalIn is the document of dialect d that refuses body with err, from this node's agent.
func (s *Server) refusalIn(err error, d dialect.Dialect, body []byte) ([]byte, error) {
	code := protocol.CodeOf(err)
	p := protocol.ErrorPayload{Code: code, Message: err.Error(), Retryable: code.Retryable()}
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Message != "" {
		p.Message = pe.Message
	}
	payload, jerr := json.Marshal(p)
	if jerr != nil {
		return nil, jerr
	}
	intent := protocol.IntentHandoff // delivered no further: ElizaOS FAILURE
	switch code {
	case protocol.CodePayloadInvalid, protocol.CodeVersionUnsupported, protocol.CodeCapabilityMismatch:
		intent = protocol.IntentNotify // not understood: ElizaOS NOT_UNDERSTOOD
	}
	m := &protocol.Message{}
	m.Envelope.Recipient.AgentID = s.n.AgentID()
	m.Envelope.CorrelationID = refusedID(body)
	m.Message = protocol.Body{Type: protocol.TypeError, Intent: intent, Payload: payload}
	if err := s.n.Builder().Seal(m); err != nil {
		return nil, err
	}
	return dialect.FromIACP(m, d)
}

// refusedID is the id a refused document gives itself (message_id, or ACP v2's id), when it
// is a JSON object with such a string member of at most 128 bytes; "" otherwise. Only the
// refused sender's own agent reads it back.
func refusedID(body []byte) string {
	var doc struct {
		MessageID json.RawMessage `json:"message_id"`
		ID        json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return ""
	}
	for _, raw := range []json.RawMessage{doc.MessageID, doc.ID} {
		var id string
		if json.Unmarshal(raw, &id) == nil && id != "" && len(id) <= protocol.MaxCorrelationIDLen {
			return id
		}
	}
	return ""
}
