package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"syscall"
)

// MediaJSON is the media type of the documents the client sends and reads.
const MediaJSON = "application/json"

// maxMessageBytes is the node's default max_message_bytes (16 MiB, IaCP 1.0 section 10).
const maxMessageBytes = 16 << 20

// DefaultAnswerLimit bounds the answers a Client reads: 17 MiB, one message of the default
// max_message_bytes (16 MiB) and 1 MiB for the JSON around it. An inbox page is larger only
// when it holds a single larger message (its budget, ?max_bytes=, is kept under the limit).
const DefaultAnswerLimit = maxMessageBytes + 1<<20

// ErrAnswerTooLarge is returned by the Client's calls when an answer is larger than the
// client reads (WithAnswerLimit); the error says which call and what to do.
var ErrAnswerTooLarge = errors.New("apiclient: the answer is larger than the client reads")

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

// Unwrap returns the cause.
func (e *NoNodeError) Unwrap() error { return e.Err }

// Option configures a Client.
type Option func(*Client)

// WithAnswerLimit bounds the answers the client reads (default DefaultAnswerLimit, at least
// 1 MiB). Raise it for a node whose max_message_bytes (in its status) is larger than 16 MiB.
func WithAnswerLimit(n int64) Option {
	return func(c *Client) { c.limit = max(n, 1<<20) }
}

// WithHTTPClient makes the calls with hc (default: a client of its own, without a timeout:
// each call's context bounds it).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// Client talks to a node's local API. It is safe for concurrent use.
type Client struct {
	base    string
	token   string
	dataDir string
	limit   int64
	hc      *http.Client
}

// New returns a client of the API at addr (host:port or an http:// URL) with token.
func New(addr, token string, opts ...Option) *Client {
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
func Dial(dataDir string, opts ...Option) (*Client, error) {
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
	c := New(addr, tok, opts...)
	c.dataDir = dataDir
	return c, nil
}

// Base returns the API's base URL.
func (c *Client) Base() string { return c.base }

// Close releases idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Do makes one call: method on path (with its query), body of media type ctype (none when
// nil), and decodes a 2xx JSON answer into out (when not nil). An error answer is an
// *APIError; no node answering, a *NoNodeError.
func (c *Client) Do(ctx context.Context, method, path string, body []byte, ctype string, out any) error {
	resp, err := c.Open(ctx, method, path, body, ctype, MediaJSON)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := c.readAnswer(resp, method, path)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return DecodeError(resp.StatusCode, raw)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// post marshals in as JSON and posts it to path.
func (c *Client) post(ctx context.Context, path string, in, out any) error {
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodPost, path, raw, MediaJSON, out)
}

// readAnswer reads an answer of at most the client's limit; a larger one is refused with
// ErrAnswerTooLarge, before reading when its Content-Length says so, and never parsed cut.
func (c *Client) readAnswer(resp *http.Response, method, path string) ([]byte, error) {
	tooLarge := func(size string) error {
		what, _, _ := strings.Cut(path, "?")
		hint := "raise the client's limit with apiclient.WithAnswerLimit"
		if what == "/v1/inbox" {
			hint = "one message in the inbox is this large (the node's max_message_bytes is above the client's limit): " +
				"read it with a client whose limit is larger (apiclient.WithAnswerLimit), or take it over the WebSocket binding"
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

// Open sends one call and returns the answer unread, for a stream (the event stream): the
// caller closes its body.
func (c *Client) Open(ctx context.Context, method, path string, body []byte, ctype, accept string) (*http.Response, error) {
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
