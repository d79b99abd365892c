package api

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// Media types the API reads and writes.
const (
	mediaJSON = "application/json"
	mediaYAML = "application/yaml"
)

// bodyFormat returns the format of a request body by its Content-Type: JSON unless it names
// YAML (application/x-yaml, application/yaml, text/yaml). An empty Content-Type is detected
// from the first byte.
func bodyFormat(r *http.Request, body []byte) (protocol.Format, error) {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return protocol.DetectFormat(body), nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", protocol.Errorf(protocol.CodePayloadInvalid, "Content-Type %q: %w", ct, err)
	}
	switch mt {
	case "application/json", "application/iacp+json", "text/json":
		return protocol.JSON, nil
	case "application/x-yaml", "application/yaml", "text/yaml", "text/x-yaml":
		return protocol.YAML, nil
	}
	return "", &httpError{status: http.StatusUnsupportedMediaType, err: protocol.Errorf(protocol.CodePayloadInvalid,
		"Content-Type %q is not supported: send application/json or application/x-yaml", ct)}
}

// acceptFormat returns the format to answer in by the Accept header: YAML when it prefers a
// YAML type, JSON otherwise.
func acceptFormat(r *http.Request) protocol.Format {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := mime.ParseMediaType(strings.TrimSpace(part))
		switch mt {
		case "application/x-yaml", "application/yaml", "text/yaml", "text/x-yaml":
			return protocol.YAML
		case "application/json", "*/*", "application/*":
			return protocol.JSON
		}
	}
	return protocol.JSON
}

// readBody reads the request's body, at most the server's max body bytes: a larger body is a
// 413, and one that does not arrive within the read timeout a 408 (the guard closes the
// connection after either).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.maxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, &httpError{status: http.StatusRequestEntityTooLarge, err: protocol.Errorf(protocol.CodePayloadInvalid,
			"request body is larger than %d bytes", s.cfg.maxBody)}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, &httpError{status: http.StatusRequestTimeout, err: protocol.Errorf(protocol.CodePayloadInvalid,
			"the request body did not arrive within the read timeout (%s): send the whole body without pausing", s.cfg.readTimeout)}
	}
	if err != nil {
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "read request body: %w", err)
	}
	return b, nil
}

// httpError carries a status that the IACP code alone does not decide (401, 413, 415).
type httpError struct {
	status int
	err    error
}

func (e *httpError) Error() string { return e.err.Error() }
func (e *httpError) Unwrap() error { return e.err }

// EncodeJSON encodes v as the API does: an IACP message in its wire encoding (signature and
// unknown members kept), anything else with encoding/json.
func EncodeJSON(v any) ([]byte, error) {
	if m, ok := v.(*protocol.Message); ok {
		return protocol.EncodeJSON(m)
	}
	return json.Marshal(v)
}

// write encodes v as JSON (or YAML by Accept) with the given status.
func write(w http.ResponseWriter, r *http.Request, status int, v any) {
	raw, err := EncodeJSON(v)
	if err != nil {
		http.Error(w, "encode answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	writeRaw(w, r, status, raw)
}

// writeRaw answers a JSON document, converted to YAML when Accept asks for it. It declares
// the Content-Length, so that a client can refuse an answer larger than it reads before
// reading any of it.
func writeRaw(w http.ResponseWriter, r *http.Request, status int, raw []byte) {
	ct := mediaJSON
	if acceptFormat(r) == protocol.YAML {
		if y, yerr := protocol.JSONToYAML(raw); yerr == nil {
			raw, ct = y, mediaYAML
		}
	} else {
		raw = append(raw, '\n')
	}
	writeBytes(w, status, ct, raw)
}

// writeBytes answers raw as it is, of media type ct, declaring its Content-Length.
func writeBytes(w http.ResponseWriter, status int, ct string, raw []byte) {
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(raw)))
	w.WriteHeader(status)
	_, _ = w.Write(raw)
}

// ErrorDoc is the body of every error answer: the payload of an IACP error message.
type ErrorDoc struct {
	Error protocol.ErrorPayload `json:"error"`
	// MessageID is the id of the message the error is about, when there is one.
	MessageID string `json:"message_id,omitempty"`
}

// fail answers err as an IACP error document and counts it by code.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error, messageID string) {
	s.metrics.errors.WithLabelValues(string(protocol.CodeOf(err))).Inc()
	writeError(w, r, err, messageID)
}

// writeError answers err as an IACP error document; its status comes from StatusOf, or from
// an *httpError in its chain.
func writeError(w http.ResponseWriter, r *http.Request, err error, messageID string) int {
	code := protocol.CodeOf(err)
	status := StatusOf(code)
	var he *httpError
	if errors.As(err, &he) {
		status = he.status
	}
	msg := err.Error()
	var pe *protocol.Error
	doc := ErrorDoc{MessageID: messageID, Error: protocol.ErrorPayload{Code: code, Message: msg, Retryable: code.Retryable()}}
	if errors.As(err, &pe) {
		doc.Error.Message = pe.Message
		if doc.Error.Message == "" {
			doc.Error.Message = msg
		}
		doc.Error.Detail = pe.Detail
		if pe.RetryAfter > 0 {
			secs := math.Ceil(pe.RetryAfter.Seconds())
			doc.Error.RetryAfter = secs
			w.Header().Set("Retry-After", strconv.Itoa(int(secs)))
		}
	}
	if status == http.StatusTooManyRequests && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", "1")
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="iacp-node"`)
	}
	write(w, r, status, doc)
	return status
}

// parseWait reads ?wait=DURATION ("10s", "1m"; a bare number is seconds), bounded by max.
func parseWait(r *http.Request, max time.Duration) (time.Duration, bool, error) {
	s := r.URL.Query().Get("wait")
	if s == "" {
		return 0, false, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, nerr := strconv.ParseFloat(s, 64)
		if nerr != nil || secs < 0 {
			return 0, false, protocol.Errorf(protocol.CodePayloadInvalid, "wait=%q is not a duration: use e.g. wait=10s", s)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d <= 0 {
		return 0, false, protocol.Errorf(protocol.CodePayloadInvalid, "wait=%q must be positive", s)
	}
	if d > max {
		return 0, false, protocol.Errorf(protocol.CodePayloadInvalid, "wait=%s is longer than the server's maximum %s", d, max)
	}
	return d, true, nil
}

func errorf(code protocol.Code, format string, args ...any) error {
	return protocol.Errorf(code, format, args...)
}

// yamlExpansion bounds the JSON a YAML body may become: four times its own size plus 64 KiB,
// and never more than limit. Without aliases JSON is about as long as the YAML it comes from
// (quotes and escapes at most double it), so only an alias bomb comes near the bound, and it
// is refused there, after a few times its own size in memory rather than the body limit.
func yamlExpansion(body []byte, limit int64) int {
	return int(min(4*int64(len(body))+64<<10, limit))
}

// yamlError turns a YAML conversion error into the answer: 413 for a document that is, or
// expands to, too much; 400 PAYLOAD_INVALID otherwise.
func yamlError(err error) error {
	pe := errorf(protocol.CodePayloadInvalid, "malformed YAML: %w", err)
	if errors.Is(err, protocol.ErrDocumentTooLarge) {
		return &httpError{status: http.StatusRequestEntityTooLarge, err: pe}
	}
	return pe
}

// readInto reads the request body (bounded by the body limit) and decodes it into v; on an
// error it answers it and returns false.
func (s *Server) readInto(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := s.readBody(w, r)
	if err == nil {
		err = decodeInto(r, body, v)
	}
	if err != nil {
		s.fail(w, r, err, "")
		return false
	}
	return true
}

// decodeInto decodes a JSON or YAML body (by Content-Type) into v.
func decodeInto(r *http.Request, body []byte, v any) error {
	if len(body) == 0 {
		return errorf(protocol.CodePayloadInvalid, "empty body")
	}
	f, err := bodyFormat(r, body)
	if err != nil {
		return err
	}
	if f == protocol.YAML {
		if body, err = protocol.YAMLToJSONLimit(body, yamlExpansion(body, 1<<30)); err != nil {
			return yamlError(err)
		}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return errorf(protocol.CodePayloadInvalid, "malformed body: %w", err)
	}
	return nil
}
