package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// ErrNotLoopback is returned by New when the listen address is not loopback and
// WithAllowRemote(true) was not given: the API speaks plain HTTP, so its bearer token would
// cross the network in clear.
var ErrNotLoopback = errors.New("api: the listen address is not loopback")

func errRemote(addr string) error {
	return fmt.Errorf("%w: %s would carry the bearer token and every message over the network in clear. "+
		"Keep the API on loopback (`iacp-node run --api 127.0.0.1:%d`), or put a TLS-terminating proxy in front of it "+
		"and allow this address with --api-allow-remote (env IACP_API_ALLOW_REMOTE=true; api.WithAllowRemote(true) in Go)",
		ErrNotLoopback, addr, DefaultPort)
}

// loopbackHost reports whether the host of addr (host:port) is loopback: localhost, an
// address in 127.0.0.0/8 or ::1, or a name that resolves only to such addresses. An empty
// host or an unspecified address (every interface) is not.
func loopbackHost(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("api listen address %q: %w (use host:port, e.g. %s)", addr, err, DefaultListen)
	}
	if host == "" {
		return false, nil
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.IsLoopback(), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return false, fmt.Errorf("api listen address %q: %w (use an IP address, e.g. %s)", addr, err, DefaultListen)
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return false, nil
		}
	}
	return len(ips) > 0, nil
}

// hostAllowed reports whether a request's Host names this server on loopback: localhost,
// 127.0.0.1, ::1 or the address it listens on, with its port or none. A web page that
// reaches the API through DNS rebinding sends its own name, and is refused.
func (s *Server) hostAllowed(h string) bool {
	host, port, err := net.SplitHostPort(h)
	if err != nil { // no port
		host, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), ""
	}
	if port != "" && port != s.port {
		return false
	}
	switch host = strings.ToLower(host); host {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return host != "" && host == s.ip
}

// guard comes before every request, routed or not. On a loopback listener it refuses a Host
// that is not this server's (DNS rebinding). It bounds reading the request's body by the read
// timeout and writing the answer by the write timeout, and an answer given before the body
// was read closes the connection, so that nothing is drained after the handler.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Time{}) // an earlier request on this connection may have set one
		gw := &guardWriter{ResponseWriter: w, rc: rc, writeTimeout: s.cfg.writeTimeout}
		if r.Body != nil && r.Body != http.NoBody {
			_ = rc.SetReadDeadline(time.Now().Add(s.cfg.readTimeout))
			gw.body = &trackedBody{ReadCloser: r.Body}
			r.Body = gw.body
		}
		if s.loopback && !s.hostAllowed(r.Host) {
			s.log.Debug("request for another host refused", "host", r.Host, "path", r.URL.Path)
			s.fail(gw, r, &httpError{status: http.StatusForbidden, err: errorf(protocol.CodePermissionDenied,
				"Host %q is not this server: on loopback the API answers only requests to localhost, 127.0.0.1 or [::1] "+
					"(port %s or none), so that a web page cannot reach it through DNS rebinding; address it as http://%s",
				r.Host, s.port, s.addr)}, "")
			return
		}
		next.ServeHTTP(gw, r)
	})
}

// guardWriter applies the guard's rules when the answer starts: it closes the connection
// when the request's body was not read, and sets the write deadline. It passes flushing and
// hijacking through. Informational answers (101 Switching Protocols) are left alone: a
// WebSocket manages its own deadlines.
type guardWriter struct {
	http.ResponseWriter
	rc           *http.ResponseController
	body         *trackedBody // nil when the request has no body
	writeTimeout time.Duration
	started      bool
}

func (g *guardWriter) start() {
	if g.started {
		return
	}
	g.started = true
	if g.body != nil && !g.body.eof.Load() {
		// Answered before the body was read (401, 403, 404, 408, 413...): close rather than
		// drain it, and stop reading now, so that a withheld body holds nothing.
		g.Header().Set("Connection", "close")
		_ = g.rc.SetReadDeadline(time.Now())
	}
	_ = g.rc.SetWriteDeadline(time.Now().Add(g.writeTimeout))
}

// WriteHeader starts the answer.
func (g *guardWriter) WriteHeader(code int) {
	if code >= 200 {
		g.start()
	}
	g.ResponseWriter.WriteHeader(code)
}

// Write starts the answer if WriteHeader did not.
func (g *guardWriter) Write(p []byte) (int, error) {
	g.start()
	return g.ResponseWriter.Write(p)
}

// Flush sends buffered data (Server-Sent Events).
func (g *guardWriter) Flush() {
	g.start()
	if f, ok := g.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (g *guardWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// Hijack hands the connection to the WebSocket library.
func (g *guardWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := g.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("connection cannot be hijacked")
	}
	return h.Hijack()
}

// trackedBody notes that the body was read to its end. Then net/http lifts the read
// deadline itself (it starts its background read of the connection), so a handler may wait
// long after (?wait=) without the read timeout cutting it.
type trackedBody struct {
	io.ReadCloser
	eof atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof.Store(true)
	}
	return n, err
}
