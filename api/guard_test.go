package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// withListenFunc makes New listen through f (a test listens on 127.0.0.1 whatever the
// configured address).
func withListenFunc(f func(network, addr string) (net.Listener, error)) Option {
	return func(c *config) error { c.listenFunc = f; return nil }
}

// countingListener counts the connections it accepted that are still open, and the most
// that ever were at once.
type countingListener struct {
	net.Listener
	testsupport.Gauge
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.Enter()
	return &countedConn{Conn: c, l: l}, nil
}

type countedConn struct {
	net.Conn
	l    *countingListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(c.l.Leave)
	return c.Conn.Close()
}

// rawRequest opens a TCP connection to s and writes head (a request line and headers, with
// the blank line) and then body, and nothing more. The connection closes when the test ends;
// reads on it fail after a generous deadline rather than hang the test.
func rawRequest(t *testing.T, s *Server, head, body string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, head+body); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// readAnswer reads one answer and its body, and its error document when it has one.
func readAnswer(t *testing.T, br *bufio.Reader) (*http.Response, ErrorDoc) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("answer body: %v", err)
	}
	var doc ErrorDoc
	_ = json.Unmarshal(raw, &doc)
	return resp, doc
}

// closedByServer says whether the server closed the connection: a read ends with EOF (or a
// reset), not with the test's deadline.
func closedByServer(br *bufio.Reader) error {
	_, err := br.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("the connection is still open: %w", err)
	}
	if err == nil {
		return errors.New("the server sent more after its answer")
	}
	return nil
}

// A client that trickles its headers (slowloris) loses its connection at the header
// timeout.
func TestGuard_TrickledHeadersAreCutAtTheHeaderTimeout(t *testing.T) {
	m := newAPIMesh(t, 1, meshOpts{server: func(int) []Option { return []Option{WithHeaderTimeout(200 * time.Millisecond)} }})
	s := m.servers[0]
	_, br := rawRequest(t, s, "GET /healthz HTTP/1.1\r\nHost: "+s.Addr()+"\r\nX-Slow: 1", "")
	_, err := io.ReadAll(br) // whatever the server says before it closes
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection is still open: %v", err)
	}
}

// A client that announces a body and sends only part of it is cut when the read timeout
// passes: 408 with an IACP error document, and the connection closes.
func TestGuard_StalledBodyIsCutAtTheReadTimeout(t *testing.T) {
	m := newAPIMesh(t, 1, meshOpts{server: func(int) []Option { return []Option{WithReadTimeout(200 * time.Millisecond)} }})
	s := m.servers[0]
	head := "POST " + MessagePath + " HTTP/1.1\r\nHost: " + s.Addr() + "\r\nAuthorization: Bearer " + s.Token() +
		"\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n\r\n"
	_, br := rawRequest(t, s, head, `{"envelope":`)
	resp, doc := readAnswer(t, br)
	if resp.StatusCode != http.StatusRequestTimeout || doc.Error.Code != protocol.CodePayloadInvalid || !strings.Contains(doc.Error.Message, "read timeout") {
		t.Fatalf("status %d, error %+v; want 408 PAYLOAD_INVALID about the read timeout", resp.StatusCode, doc.Error)
	}
	if !resp.Close {
		t.Fatal("the answer does not say Connection: close")
	}
	if err := closedByServer(br); err != nil {
		t.Fatal(err)
	}
}

// A request refused before its body is read is answered at once and its connection closed:
// the server does not wait for (or drain) a body it will not use. The read timeout is an
// hour, so only that rule can close these connections within the test's deadline.
func TestGuard_AnsweredBeforeTheBodyClosesTheConnection(t *testing.T) {
	m := newAPIMesh(t, 1, meshOpts{server: func(int) []Option { return []Option{WithReadTimeout(time.Hour)} }})
	s := m.servers[0]
	cases := []struct {
		name, method, path, host, auth string
		status                         int
	}{
		{"no token", "POST", MessagePath, s.Addr(), "", 401},
		{"forged Host", "POST", MessagePath, "attacker.example:" + s.port, s.Token(), 403},
		{"unknown path", "POST", "/v1/nothing-here", s.Addr(), s.Token(), 404},
		{"wrong method", "PUT", "/v1/status", s.Addr(), s.Token(), 405},
		{"a body nobody reads", "GET", "/healthz", s.Addr(), "", 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			head := c.method + " " + c.path + " HTTP/1.1\r\nHost: " + c.host + "\r\nContent-Length: 200000\r\n"
			if c.auth != "" {
				head += "Authorization: Bearer " + c.auth + "\r\n"
			}
			_, br := rawRequest(t, s, head+"\r\n", "")
			resp, _ := readAnswer(t, br)
			if resp.StatusCode != c.status || !resp.Close {
				t.Fatalf("status %d, Connection: close %v; want %d and close", resp.StatusCode, resp.Close, c.status)
			}
			if err := closedByServer(br); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A client that asks for a large answer and does not read it (a slow read) loses its
// connection at the write timeout: the server closes it rather than wait for ever. The
// answer is an inbox page holding one message of the maximum size, larger than the socket
// buffers between the two ends (the client's is shrunk to a few KiB).
func TestGuard_AClientThatStopsReadingIsCutAtTheWriteTimeout(t *testing.T) {
	cl := &countingListener{}
	listen := func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr)
		cl.Listener = ln
		return cl, err
	}
	m := newAPIMesh(t, 2, meshOpts{node: quickNodes, server: func(i int) []Option {
		if i != 1 {
			return nil
		}
		return []Option{WithWriteTimeout(200 * time.Millisecond), withListenFunc(listen)}
	}})
	sendToInbox(t, m, maxPayload('w'))
	s := m.servers[1]
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "GET /v1/inbox HTTP/1.1\r\nHost: "+s.Addr()+"\r\nAuthorization: Bearer "+s.Token()+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 10*time.Second, "the server accepts the connection", func() bool { _, most := cl.Counts(); return most == 1 })
	testsupport.WaitFor(t, 10*time.Second, "the server closes the connection it cannot write to", func() bool { open, _ := cl.Counts(); return open == 0 })
}

// The read timeout bounds reading a request, not answering it: a WebSocket, the event
// stream, an inbox long poll and a POST that waits for its response all outlive it.
func TestGuard_LongRequestsOutliveTheReadTimeout(t *testing.T) {
	const readTimeout = 100 * time.Millisecond
	m := newAPIMesh(t, 2, meshOpts{server: func(int) []Option {
		return []Option{WithReadTimeout(readTimeout), WithHeaderTimeout(readTimeout), WithPing(time.Minute, 10*time.Second)}
	}})
	ctx := testCtx(t, 30*time.Second)
	c0, c1 := m.clients[0], m.clients[1]

	// On node 1: a WebSocket, the event stream and a long poll, all waiting; and a request
	// to agent 0, whose body is read at once and whose response comes after the timeout.
	ws := dialWS(t, ctx, m.servers[1])
	defer ws.CloseNow()
	events := make(chan EventItem, 16)
	sctx, stopEvents := context.WithCancel(ctx)
	eventsDone := make(chan error, 1)
	go func() {
		eventsDone <- Events(sctx, c1, EventFilter{Kinds: []string{KindMessage}}, func(it EventItem) error { events <- it; return nil })
	}()
	defer func() { stopEvents(); <-eventsDone }()
	type polled struct {
		doc apiclient.InboxDoc
		err error
	}
	poll := make(chan polled, 1)
	go func() {
		doc, err := c1.Inbox(ctx, 0, 20*time.Second)
		poll <- polled{doc, err}
	}()
	answered := make(chan error, 1)
	go func() {
		_, err := c1.Request(ctx, request(agentName(0), protocol.IntentHandoff, `{}`), 20*time.Second)
		answered <- err
	}()

	time.Sleep(5 * readTimeout) // let every read deadline that could wrongly apply pass

	// Agent 0 answers the request; the POST that waited gets the response.
	if err := answerOnce(ctx, c0, agentName(0)); err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != nil {
		t.Fatalf("POST ?wait= after the read timeout: %v", err)
	}
	// A message for agent 1 reaches the long poll, the WebSocket and the event stream.
	res, err := c0.Send(ctx, request(agentName(1), protocol.IntentNotify, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if p := <-poll; p.err != nil || len(p.doc.Messages) != 1 || p.doc.Messages[0].Message.Envelope.MessageID != res.MessageID {
		t.Fatalf("long poll: %+v, %v", p.doc, p.err)
	}
	if got := readDoc(t, ctx, ws); got.Envelope.MessageID != res.MessageID {
		t.Fatalf("WebSocket delivered %s, want %s", got.Envelope.MessageID, res.MessageID)
	}
	ack, _ := json.Marshal(AckFrame{Ack: res.MessageID})
	if err := ws.Write(ctx, websocket.MessageText, ack); err != nil {
		t.Fatalf("WebSocket write: %v", err)
	}
	if f := readResult(t, ctx, ws); f.Acked != res.MessageID {
		t.Fatalf("WebSocket ack result %+v", f)
	}
	select {
	case it := <-events:
		if it.Inbound == nil || it.Inbound.MessageID != res.MessageID {
			t.Fatalf("event %+v", it)
		}
	case <-ctx.Done():
		t.Fatal("the event stream carried no notice")
	}
}

// At most WithMaxConnections connections are served at once; one more waits until one of
// them closes, and is then served. (The two held here are kept-alive connections of a client
// with the token: connections without one hold only a share of the slots, below.)
func TestGuard_ConnectionLimit(t *testing.T) {
	cl := &countingListener{}
	listen := func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr)
		cl.Listener = ln
		return cl, err
	}
	m := newAPIMesh(t, 1, meshOpts{server: func(int) []Option {
		return []Option{WithMaxConnections(2), withListenFunc(listen), WithHeaderTimeout(time.Hour)}
	}})
	s := m.servers[0]
	openNow := func() int { open, _ := cl.Counts(); return open }
	// Two clients with the token keep their connections alive after a request.
	authed := "GET /v1/status HTTP/1.1\r\nHost: " + s.Addr() + "\r\nAuthorization: Bearer " + s.Token() + "\r\n\r\n"
	var held1 net.Conn
	for i := range 2 {
		c, br := rawRequest(t, s, authed, "")
		if resp, _ := readAnswer(t, br); resp.StatusCode != http.StatusOK {
			t.Fatalf("a held connection's request: %d", resp.StatusCode)
		}
		if i == 0 {
			held1 = c
		}
	}
	testsupport.WaitFor(t, 10*time.Second, "both held connections accepted", func() bool { return openNow() == 2 })

	_, br := rawRequest(t, s, "GET /healthz HTTP/1.1\r\nHost: "+s.Addr()+"\r\n\r\n", "")
	served := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			served <- 0
			return
		}
		resp.Body.Close()
		served <- resp.StatusCode
	}()
	select {
	case code := <-served:
		t.Fatalf("a third connection was served (%d) while two were held", code)
	default:
	}
	held1.Close()
	if code := <-served; code != http.StatusOK {
		t.Fatalf("the waiting connection got %d, want 200 once a slot freed", code)
	}
	if _, most := cl.Counts(); most != 2 {
		t.Fatalf("%d connections were open at once, the limit is 2", most)
	}
}

// On loopback the server answers only requests addressed to a loopback name with its port
// (or none): a web page that reaches it through DNS rebinding sends its own Host and gets
// 403 with an error document that says why, on every route, /healthz and /metrics included.
func TestGuard_HostCheckRefusesDNSRebinding(t *testing.T) {
	m := newAPIMesh(t, 1, meshOpts{})
	s := m.servers[0]
	get := func(path, host string) (int, ErrorDoc) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, s.URL()+path, nil)
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+s.Token())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var doc ErrorDoc
		_ = json.Unmarshal(raw, &doc)
		return resp.StatusCode, doc
	}
	for _, host := range []string{"attacker.example:" + s.port, "attacker.example", "127.0.0.1:1", "localhost:1", "10.0.0.1:" + s.port} {
		for _, path := range []string{"/healthz", "/metrics", "/v1/status"} {
			status, doc := get(path, host)
			if status != http.StatusForbidden || doc.Error.Code != protocol.CodePermissionDenied || !strings.Contains(doc.Error.Message, "DNS rebinding") {
				t.Fatalf("GET %s with Host %q: %d %+v; want 403 PERMISSION_DENIED that explains", path, host, status, doc.Error)
			}
		}
	}
	for _, host := range []string{s.Addr(), "localhost:" + s.port, "LOCALHOST:" + s.port, "localhost", "127.0.0.1", "[::1]:" + s.port, "[::1]"} {
		if status, doc := get("/healthz", host); status != http.StatusOK {
			t.Fatalf("GET /healthz with Host %q: %d %+v; want 200", host, status, doc.Error)
		}
	}
}

// syncLog is a log destination safe for the server's goroutines.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *syncLog) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// The server refuses to listen off loopback, saying what to do, unless WithAllowRemote(true)
// is given; then it warns loudly at start, and it does not check the Host header (a
// TLS-terminating proxy in front has its own name). The test listens on 127.0.0.1 whatever
// the address says.
func TestServer_ListensOffLoopbackOnlyWhenAllowed(t *testing.T) {
	m := newAPIMesh(t, 1, meshOpts{})
	listened := 0
	onLoopback := func(string, string) (net.Listener, error) { listened++; return net.Listen("tcp", "127.0.0.1:0") }
	tok := strings.Repeat("t", 32)
	for _, addr := range []string{"0.0.0.0:9700", ":9700", "[::]:9700", "192.0.2.10:9700"} {
		_, err := New(m.nodes[0], WithToken(tok), WithListen(addr), withListenFunc(onLoopback), WithLogger(slog.New(slog.DiscardHandler)))
		if !errors.Is(err, ErrNotLoopback) || !strings.Contains(err.Error(), "--api-allow-remote") || !strings.Contains(err.Error(), "TLS") {
			t.Fatalf("listen on %s: %v; want ErrNotLoopback saying how to allow it", addr, err)
		}
	}
	if listened != 0 {
		t.Fatal("a refused address was listened on")
	}

	var logs syncLog
	s, err := New(m.nodes[0], WithToken(tok), WithListen("0.0.0.0:9700"), WithAllowRemote(true), withListenFunc(onLoopback),
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Loopback() || !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "in clear") {
		t.Fatalf("no loud warning at start: loopback %v, log:\n%s", s.Loopback(), logs.String())
	}
	req, _ := http.NewRequest(http.MethodGet, s.URL()+"/healthz", nil)
	req.Host = "iacp.example.org"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("behind a proxy, Host %q got %d", req.Host, resp.StatusCode)
	}
}

// Connections that carry no token (here: never finishing their headers, and reopened as fast
// as they are cut) hold at most an eighth of the slots: each new one closes the oldest, and a
// client with the token is served while they keep coming.
func TestGuard_ConnectionsWithoutATokenHoldASmallShare(t *testing.T) {
	cl := &countingListener{}
	listen := func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr)
		cl.Listener = ln
		return cl, err
	}
	m := newAPIMesh(t, 1, meshOpts{server: func(int) []Option {
		return []Option{WithMaxConnections(16), withListenFunc(listen), WithHeaderTimeout(time.Hour)}
	}})
	s := m.servers[0]
	partial := "GET /healthz HTTP/1.1\r\nHost: " + s.Addr() + "\r\n"
	for range 40 {
		rawRequest(t, s, partial, "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		if _, err := m.clients[0].Status(ctx); err != nil {
			t.Fatalf("request %d with the token among 40 connections without: %v", i+1, err)
		}
		rawRequest(t, s, partial, "")
	}
	testsupport.WaitFor(t, 10*time.Second, "the connections without a token cut to their share", func() bool {
		open, _ := cl.Counts()
		return open <= unauthShare(16)+1 // the share, and the client's kept-alive connection
	})
}
