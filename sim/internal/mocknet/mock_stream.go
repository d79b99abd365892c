package mocknet

// This file is not go-libp2p's: it replaces its mock_stream.go (see doc.go).

import (
	"errors"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
)

var streamCounter atomic.Int64

// ErrClosed is what a stream returns for a read or write after it (or, for a write, the other
// end's read side) was closed.
var ErrClosed = errors.New("stream closed")

// window is how many bytes one direction of a stream holds that its reader has not read yet;
// a writer waits while it is full (a write larger than the window goes through alone). It is
// the flow control a real stream multiplexer gives, and bounds what a stalled reader costs.
const window = 256 << 10

// stream is one end of a stream between two peers. It runs no goroutine: what one end writes
// is appended to a half (the other end's reading direction) with the time the link delivers
// it, and the reader takes it once that time has come, sleeping until then if need be.
type stream struct {
	rstream *stream
	conn    *conn
	id      int64

	in  *half // what this end reads: the other end's out
	out *half // what this end writes: the other end's in

	protocol atomic.Pointer[protocol.ID]
	stat     network.Stats

	removeOnce sync.Once
}

// half is one direction of a stream. Guarded by mu.
type half struct {
	mu sync.Mutex
	// changed is broadcast when anything a waiter waits for happens (data, room, a close, a
	// reset, a deadline moved); waiters counts the goroutines waiting on it. A waiter
	// that must also wake at a time arms alarm for it: wakeAt is when alarm fires (zero:
	// not armed), the soonest time any waiter asked for. The half allocates nothing per
	// wait: a channel and a timer made at every wait were a tenth of a 700-node mesh's
	// allocations.
	changed sync.Cond
	waiters int
	alarm   *time.Timer
	wakeAt  time.Time

	// q holds what was written and not read; its first ready bytes have arrived. It holds
	// chunks only while it has unread bytes (buffers kept by idle streams were once the
	// largest item of a 300-node mesh's heap, 10 %).
	q     queue
	ready int
	marks []mark // marks[mhead:] are the writes not arrived yet, oldest first
	mhead int

	writeClosed bool // the writer closed: io.EOF once everything was read
	readClosed  bool // the reader closed: writes fail
	reset       bool // either end reset the stream: everything fails

	// readBy is the reader's deadline and writeBy the writer's (zero: none): a read that
	// would wait for data, or a write that would wait for room, fails once it has passed.
	readBy, writeBy time.Time
}

// mark is the size of one write and when it arrives (zero: at once).
type mark struct {
	size int
	at   time.Time
}

func newStreamPair() (*stream, *stream) {
	ab, ba := newHalf(), newHalf()
	sa := &stream{id: streamCounter.Add(1), in: ba, out: ab, stat: network.Stats{Direction: network.DirOutbound}}
	sb := &stream{id: streamCounter.Add(1), in: ab, out: ba, stat: network.Stats{Direction: network.DirInbound}}
	sa.rstream, sb.rstream = sb, sa
	return sa, sb
}

// newHalf returns an empty direction whose waiters wait on its own lock.
func newHalf() *half {
	h := new(half)
	h.changed.L = &h.mu
	return h
}

// failed returns why a read or write on h fails: network.ErrReset after a reset, ErrClosed
// when closed (the side it cannot use is closed); nil otherwise. mu is held.
func (h *half) failed(closed bool) error {
	switch {
	case h.reset:
		return network.ErrReset
	case closed:
		return ErrClosed
	}
	return nil
}

// notify wakes every waiter; mu is held.
func (h *half) notify() {
	if h.waiters > 0 {
		h.changed.Broadcast()
	}
}

// sleep waits until the next change or until d has passed (d > 0); mu is held, and released
// while it waits. It may return early: every caller looks again at what it waits for.
func (h *half) sleep(d time.Duration) {
	if d > 0 {
		if at := time.Now().Add(d); h.wakeAt.IsZero() || at.Before(h.wakeAt) {
			h.wakeAt = at
			if h.alarm == nil {
				h.alarm = time.AfterFunc(d, h.ring)
			} else {
				h.alarm.Reset(d)
			}
		}
	}
	h.waiters++
	h.changed.Wait()
	h.waiters--
	if h.waiters == 0 && !h.wakeAt.IsZero() {
		// Nobody waits for the alarm any more. Should it have fired already, ring only
		// wakes whoever waits next, who looks again and waits again.
		h.alarm.Stop()
		h.wakeAt = time.Time{}
	}
}

// ring is the alarm: it wakes every waiter, each of which arms it again for its own time if
// that has not come.
func (h *half) ring() {
	h.mu.Lock()
	h.wakeAt = time.Time{}
	h.notify()
	h.mu.Unlock()
}

// left returns how long until deadline (0 when there is none) and whether it has passed.
func left(deadline time.Time) (time.Duration, bool) {
	if deadline.IsZero() {
		return 0, false
	}
	d := time.Until(deadline)
	return d, d <= 0
}

// sooner returns the shorter of two waits, where 0 is no bound (wait for a change).
func sooner(a, b time.Duration) time.Duration {
	if a == 0 || b > 0 && b < a {
		return b
	}
	return a
}

// arrive adds to ready the writes that have arrived by now, and returns how long until the
// next one does (0 when none is on its way); mu is held.
func (h *half) arrive() time.Duration {
	var now time.Time
	for ; h.mhead < len(h.marks); h.mhead++ {
		m := h.marks[h.mhead]
		if !m.at.IsZero() {
			if now.IsZero() {
				now = time.Now()
			}
			if d := m.at.Sub(now); d > 0 {
				return d
			}
		}
		h.ready += m.size
	}
	h.marks, h.mhead = h.marks[:0], 0
	return 0
}

// Write queues a copy of p for the other end, arriving after the link's latency and the time
// its bandwidth takes (or when the network's Schedule says). It waits while the window is full, until the write deadline.
func (s *stream) Write(p []byte) (int, error) {
	l := s.conn.link
	var at time.Time
	delay := l.GetLatency() + l.RateLimit(len(p))
	if sched := s.conn.net.mocknet.schedule; sched != nil {
		at = sched(s.conn.local, s.conn.remote, len(p), time.Now(), delay)
	} else if delay > 0 {
		at = time.Now().Add(delay)
	}
	h := s.out
	h.mu.Lock()
	for {
		if err := h.failed(h.writeClosed || h.readClosed); err != nil {
			h.mu.Unlock()
			return 0, err
		}
		if h.q.Len() == 0 || h.q.Len()+len(p) <= window { // room, or a write alone
			h.q.write(p)
			if at.IsZero() && h.mhead == len(h.marks) {
				h.ready += len(p)
			} else {
				h.marks = append(h.marks, mark{size: len(p), at: at})
			}
			h.notify()
			h.mu.Unlock()
			return len(p), nil
		}
		d, passed := left(h.writeBy)
		if passed {
			h.mu.Unlock()
			return 0, os.ErrDeadlineExceeded
		}
		h.sleep(d)
	}
}

// Read reads what has arrived, waiting for the next write to arrive when nothing has, until
// the read deadline; io.EOF once the other end closed its write side and everything was read.
// What has arrived is read even past the deadline, as from a yamux stream.
func (s *stream) Read(b []byte) (int, error) {
	h := s.in
	h.mu.Lock()
	for {
		if err := h.failed(h.readClosed); err != nil {
			h.mu.Unlock()
			return 0, err
		}
		next := h.arrive()
		if h.ready > 0 || len(b) == 0 {
			n := h.q.read(b[:min(len(b), h.ready)])
			h.ready -= n
			h.notify()
			h.mu.Unlock()
			return n, nil
		}
		if h.writeClosed && h.q.Len() == 0 {
			h.mu.Unlock()
			return 0, io.EOF
		}
		d, passed := left(h.readBy)
		if passed {
			h.mu.Unlock()
			return 0, os.ErrDeadlineExceeded
		}
		h.sleep(sooner(next, d))
	}
}

// drop drops what was written and not read; mu is held.
func (h *half) drop() {
	h.q.free()
	h.marks, h.mhead, h.ready = nil, 0, 0
}

// ID is the stream's number in this process.
func (s *stream) ID() string {
	return strconv.FormatInt(s.id, 10)
}

// Protocol is the protocol negotiated on the stream ("" before).
func (s *stream) Protocol() protocol.ID {
	p := s.protocol.Load()
	if p == nil {
		return ""
	}
	return *p
}

// Stat says which end opened the stream.
func (s *stream) Stat() network.Stats {
	return s.stat
}

// SetProtocol records the negotiated protocol.
func (s *stream) SetProtocol(proto protocol.ID) error {
	s.protocol.Store(&proto)
	return nil
}

// CloseWrite closes the write side: the other end reads io.EOF after what was written. It
// returns network.ErrReset when the stream was reset.
func (s *stream) CloseWrite() error {
	h := s.out
	h.mu.Lock()
	wasReset := h.reset
	h.writeClosed = true
	h.notify()
	h.mu.Unlock()
	s.remove()
	if wasReset {
		return network.ErrReset
	}
	return nil
}

// CloseRead closes the read side: what was not read is dropped, and the other end's writes
// fail.
func (s *stream) CloseRead() error {
	h := s.in
	h.mu.Lock()
	h.readClosed = true
	h.drop()
	h.notify()
	h.mu.Unlock()
	return nil
}

// Close closes both sides: CloseRead, then CloseWrite.
func (s *stream) Close() error {
	_ = s.CloseRead()
	return s.CloseWrite()
}

// Reset fails every read and write at both ends with network.ErrReset.
func (s *stream) Reset() error {
	for _, h := range []*half{s.in, s.out} {
		h.mu.Lock()
		h.reset = true
		h.drop()
		h.notify()
		h.mu.Unlock()
	}
	s.remove()
	return nil
}

// ResetWithError resets the stream. It ignores the provided error code.
func (s *stream) ResetWithError(_ network.StreamErrorCode) error {
	return s.Reset()
}

// remove takes the stream off its connection's list, once.
func (s *stream) remove() {
	s.removeOnce.Do(func() {
		if s.conn != nil {
			s.conn.removeStream(s)
		}
	})
}

// Conn is the connection the stream runs on.
func (s *stream) Conn() network.Conn {
	return s.conn
}

// SetDeadline sets the read and the write deadline. (go-libp2p's mocknet ignores deadlines;
// the node's read deadlines, its idle timeout among them, hold in a simulation as they do on
// a deployed node's yamux streams.)
func (s *stream) SetDeadline(t time.Time) error {
	_ = s.SetReadDeadline(t)
	return s.SetWriteDeadline(t)
}

// SetReadDeadline sets when a read waiting for data fails with os.ErrDeadlineExceeded (zero:
// never); a read waiting now sees the new deadline.
func (s *stream) SetReadDeadline(t time.Time) error {
	s.in.setDeadline(&s.in.readBy, t)
	return nil
}

// SetWriteDeadline sets when a write waiting for room in the window fails with
// os.ErrDeadlineExceeded (zero: never).
func (s *stream) SetWriteDeadline(t time.Time) error {
	s.out.setDeadline(&s.out.writeBy, t)
	return nil
}

// setDeadline sets one of h's deadlines and wakes its waiters to look at it again.
func (h *half) setDeadline(deadline *time.Time, t time.Time) {
	h.mu.Lock()
	*deadline = t
	h.notify()
	h.mu.Unlock()
}

// Scope is a null resource scope: mocknet accounts for nothing.
func (s *stream) Scope() network.StreamScope {
	return &network.NullScope{}
}
