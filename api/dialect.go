package api

import (
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
	d := dialect.Dialect(name)
	if d == dialect.IACP {
		return d, nil
	}
	for _, t := range dialect.Translated {
		if d == t {
			return d, nil
		}
	}
	return "", errorf(protocol.CodePayloadInvalid, "dialect %q is unknown: use iacp, %s, %s, %s or %s",
		name, dialect.IaCP1, dialect.ElizaOS, dialect.ACPv2, dialect.A2ACP)
}

// decodeJSON reads a JSON document as the IACP message it is or maps to: in dialect d when
// the client named one, else the one it is recognised as (dialect.Recognise, skipped when
// dialect.MayBeForeign says it can only find IACP). A document of another draft goes through
// dialect.ToIACP, one that is IACP's own (or none the node can place) through the IACP
// decoder. It returns the dialect to answer in.
func (s *Server) decodeJSON(d dialect.Dialect, body []byte) (*protocol.Message, dialect.Dialect, error) {
	if d == "" && dialect.MayBeForeign(body) {
		if found, err := dialect.Recognise(body); err == nil {
			d = found
		}
	}
	if d == "" || d == dialect.IACP {
		m, err := protocol.DecodeJSON(body)
		return m, dialect.IACP, err
	}
	doc, err := dialect.Decode(d, body)
	if err != nil {
		return nil, "", err
	}
	draft, err := dialect.ToIACP(doc, s.n.Now())
	if err != nil {
		return nil, "", err
	}
	m, err := draft.Message()
	if err != nil {
		return nil, "", err
	}
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

// renderDialect is an inbound message as a client of dialect d reads it: its IACP document
// when d is IACP or m has no shape in d (an event, say: the client still gets everything, in
// IACP, rather than nothing), else the document of d.
func renderDialect(m *protocol.Message, d dialect.Dialect) ([]byte, error) {
	if d != "" && d != dialect.IACP {
		if raw, err := dialect.FromIACP(m, d); err == nil {
			return raw, nil
		}
	}
	return protocol.EncodeJSON(m)
}
