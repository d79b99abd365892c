package api

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// guard comes before every request, routed or not. It bounds reading the request's body by
// the read timeout and writing the answer by the write timeout, and an answer given before the
// body was read closes the connection, so that nothing is drained after the handler.
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
