package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

// Every /iacp/1.0.0 stream, one a peer opened (inStream) or one the node opened (session),
// is read by a goroutine of its own into a queue that the stream's serving goroutine takes
// from in batches: reading overlaps verification, and a burst is served as one store commit
// and one receipt (docs/node.md, "Measured"). What a peer can make the node hold is bounded
// here, before a frame's body is read:
//
//   - the length prefix is checked against max_message_bytes;
//   - the peer's byte rate is charged (rate_bytes_per_second): a peer over it has that frame
//     answered once and its stream ended, and until its bucket refills (its penalty) every
//     frame it starts on any stream ends that stream unread;
//   - the frame's bytes are reserved against the node-wide budget (queueBudget), charged to
//     the peer: per stream, per peer and in all; a frame that does not fit waits, unread, and
//     one larger than a bound is taken only when nothing else is, so large frames are taken
//     one at a time;
//   - the same bytes are reserved on the stream's libp2p resource-manager scope, so that the
//     limits an operator sets there (stream, peer, protocol, system) apply as well.
//
// Only then is the body read, within frame_timeout, into one buffer of its size. The
// reservation is held through every stage the frame's bytes live through: decoding (the
// message holds views of the frame, no copy), verifying (the canonical form streams into the
// hash), validating (nothing copied), the store's write (the journal writes the frame's bytes
// as they are; a message of 1 MiB or more goes to a file of its own) and the audit entry
// (written from the frame too), until the batch it came in is served and the message is
// stored, handed to a Go handler, or dropped. A message that waits in the inbox is then the
// inbox's (bounded by inbox_sender_bytes and its total; a large one is kept as its envelope,
// its bytes on disk). So the budget's bytes are, within a few percent, all the memory messages
// in flight cost (BenchmarkInbound16MiB: 18 MB allocated for a 16.8 MB message).

// frame is one frame read from a stream and not yet served.
type frame struct {
	raw []byte
	// overRate marks the frame that took the peer past its byte rate: it is answered with
	// RATE_LIMITED and the stream ends after it.
	overRate bool
}

// errPenalized ends the reading of a stream whose peer is serving a rate penalty.
var errPenalized = errors.New("the peer is over its rate; its frames are not read until its penalty ends")

// errOverRate ends the reading of a stream after the frame that went over the byte rate.
var errOverRate = errors.New("the peer went over its byte rate")

// queueBudget bounds the bytes of frames read and not yet served: per stream, per peer and
// in all. Its state is guarded by mu; freed is closed and replaced when bytes are released
// while a reader waits for room (waiting), so that any number of readers can wait.
type queueBudget struct {
	perStream, perPeer, total int64

	mu      sync.Mutex
	peers   map[peer.ID]int64
	used    int64
	freed   chan struct{}
	waiting bool
	// peakPeer and peakTotal are the most bytes ever queued for one peer and in all.
	peakPeer, peakTotal int64
}

func newQueueBudget(perStream, perPeer, total int64) *queueBudget {
	return &queueBudget{perStream: perStream, perPeer: perPeer, total: total,
		peers: make(map[peer.ID]int64), freed: make(chan struct{})}
}

// fits reports whether n more bytes may join used under limit: always when nothing is
// queued, so that a frame larger than the limit is served alone rather than never.
func fits(used, n, limit int64) bool { return used == 0 || used+n <= limit }

// acquire reserves n bytes for p's stream whose queued bytes are *stream, waiting until they
// fit or ctx ends.
func (b *queueBudget) acquire(ctx context.Context, p peer.ID, stream *int64, n int64) error {
	for {
		b.mu.Lock()
		pu := b.peers[p]
		if fits(*stream, n, b.perStream) && fits(pu, n, b.perPeer) && fits(b.used, n, b.total) {
			*stream += n
			b.peers[p] = pu + n
			b.used += n
			b.peakPeer, b.peakTotal = max(b.peakPeer, pu+n), max(b.peakTotal, b.used)
			b.mu.Unlock()
			return nil
		}
		wait := b.freed
		b.waiting = true
		b.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release returns n bytes of p's stream.
func (b *queueBudget) release(p peer.ID, stream *int64, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	*stream -= n
	b.used -= n
	if b.peers[p] -= n; b.peers[p] <= 0 {
		delete(b.peers, p)
	}
	if b.waiting {
		close(b.freed)
		b.freed, b.waiting = make(chan struct{}), false
	}
}

// QueueStats says how many bytes of frames read and not yet served the node holds.
type QueueStats struct {
	// Bytes is what is queued now; PeakPeerBytes and PeakBytes the most ever queued for one
	// peer and in all.
	Bytes, PeakPeerBytes, PeakBytes int64
	// PeerBytes, StreamBytes and TotalBytes are the bounds (queue_peer_bytes, ...).
	StreamBytes, PeerBytes, TotalBytes int64
}

func (b *queueBudget) stats() QueueStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return QueueStats{Bytes: b.used, PeakPeerBytes: b.peakPeer, PeakBytes: b.peakTotal,
		StreamBytes: b.perStream, PeerBytes: b.perPeer, TotalBytes: b.total}
}

// frameReader reads the frames of one stream into frames, closed when reading ends; err says
// why, once done is closed. Its byte counts are guarded by the node's queueBudget.
type frameReader struct {
	n      *wire
	s      network.Stream
	remote peer.ID
	frames chan frame
	done   chan struct{}
	err    error
	ctx    context.Context
	cancel context.CancelFunc
	queued int64 // bytes read and not yet released; guarded by n.budget.mu
}

// run reads frames until the stream ends, a rule ends it, or cancel.
func (r *frameReader) run() {
	defer close(r.done)
	defer close(r.frames)
	n := r.n
	br := bufio.NewReader(r.s)
	deadline := lazyDeadline{set: r.s.SetReadDeadline}
	for {
		deadline.extend(time.Now(), n.cfg.IdleTimeout)
		size, err := protocol.ReadFrameHeader(br, n.cfg.MaxMessageBytes)
		if err != nil {
			r.err = err
			return
		}
		now := n.now()
		if n.rate.penalized(r.remote, now) {
			r.err = errPenalized
			return
		}
		over := !n.rate.allowBytes(r.remote, now, size)
		if err := r.reserve(int64(size)); err != nil {
			r.err = err
			return
		}
		// The bytes are reserved, so the body is read into one buffer of its announced size
		// (ReadFrameBody's growing buffer would leave as much again behind as garbage), within
		// frame_timeout unless it has arrived already.
		if br.Buffered() < size {
			deadline.extend(time.Now(), n.cfg.FrameTimeout)
		}
		raw := make([]byte, size)
		_, err = io.ReadFull(br, raw)
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			r.release(int64(size))
			r.err = err
			return
		}
		select {
		case r.frames <- frame{raw: raw, overRate: over}:
		case <-r.ctx.Done():
			r.release(int64(size))
			r.err = r.ctx.Err()
			return
		}
		if over {
			r.err = errOverRate
			return
		}
	}
}

// reserve takes size bytes from the queue budget and from the stream's resource-manager
// scope. When the resource manager refuses while frames of this stream still wait, it waits
// for them to be served and tries again; refused with nothing queued, the frame cannot be
// held at all and reading ends.
func (r *frameReader) reserve(size int64) error {
	b := r.n.budget
	if err := b.acquire(r.ctx, r.remote, &r.queued, size); err != nil {
		return err
	}
	for {
		err := r.s.Scope().ReserveMemory(int(size), network.ReservationPriorityAlways)
		if err == nil {
			return nil
		}
		b.mu.Lock()
		alone := r.queued == size
		wait := b.freed
		b.waiting = true
		b.mu.Unlock()
		if alone {
			b.release(r.remote, &r.queued, size)
			return fmt.Errorf("the resource manager refuses %d bytes for a frame: %w", size, err)
		}
		select {
		case <-wait:
		case <-r.ctx.Done():
			b.release(r.remote, &r.queued, size)
			return r.ctx.Err()
		}
	}
}

// release gives back the bytes of frames that were served or dropped.
func (r *frameReader) release(size int64) {
	r.n.budget.release(r.remote, &r.queued, size)
	r.s.Scope().ReleaseMemory(int(size))
}

// pump reads the frames of s on a goroutine it owns and hands them to serve in batches of at
// most maxBatch, in order; after each batch it calls idle when no further frame is already
// waiting. When serve returns false the stream is abandoned: pump closes its read side,
// stops the reader and returns errServeStopped; closing or resetting s is the caller's.
// Otherwise it returns when reading ends, with the reason (io.EOF for a clean end); the node's
// context ending closes the read side, so that reading always ends then.
func (n *wire) pump(s network.Stream, remote peer.ID, serve func([]frame) bool, idle func()) error {
	ctx, cancel := context.WithCancel(n.ctx)
	defer cancel()
	// Not only the host's Close or a read deadline: a session opened after Close listed them,
	// on a stream that outlives the host (mocknet's, which also ignores deadlines), is read
	// until the node's end, and Close waits for its reader.
	stop := context.AfterFunc(n.ctx, func() { _ = s.CloseRead() })
	defer stop()
	r := &frameReader{n: n, s: s, remote: remote, frames: make(chan frame, maxBatch), done: make(chan struct{}), ctx: ctx, cancel: cancel}
	go r.run()
	for {
		f, open := <-r.frames
		var batch []frame
		for open {
			batch = append(batch, f)
			if len(batch) == maxBatch {
				break
			}
			select {
			case f, open = <-r.frames:
				continue
			default:
			}
			break
		}
		ok := len(batch) == 0 || serve(batch)
		var size int64
		for _, f := range batch {
			size += int64(len(f.raw))
		}
		r.release(size)
		if !ok {
			cancel()
			_ = s.CloseRead() // ends a Read in progress; nothing more is read from s
			for f := range r.frames {
				r.release(int64(len(f.raw)))
			}
			<-r.done
			return errServeStopped
		}
		idle()
		if open {
			continue
		}
		<-r.done
		return r.err
	}
}

// largeFrame is the size from which frames are decoded and verified one at a time node-wide:
// each costs tens of milliseconds of one core (the canonical form hashed, the payload
// scanned), and several peers' large frames at once would hold the small frames of every
// stream behind them on both cores. (Their memory is the budget's: they cost no copy.)
const largeFrame = 1 << 20

// holdLarge waits for the node's one large-frame slot when a frame of size bytes is large,
// and returns what gives it back (nothing to give back for a small frame). The slot covers
// decoding and verifying only, never a write to a peer, so that no peer can hold it for
// longer than that costs. ok is false when the node closes meanwhile.
func (n *wire) holdLarge(size int) (release func(), ok bool) {
	if size < largeFrame {
		return func() {}, true
	}
	select {
	case n.large <- struct{}{}:
		return func() { <-n.large }, true
	case <-n.ctx.Done():
		return func() {}, false
	}
}

// openFrame decodes a frame from remote, holding the large-frame slot when it is large. ok is
// false when the node is closing or the frame is not a document (audited as a refusal): the
// stream must end, and the slot is free. Otherwise the caller gives the slot back (release)
// once it has verified the signature. The message holds views of the frame, which is kept as
// it is.
func (n *wire) openFrame(f frame, remote peer.ID) (m *protocol.Message, release func(), ok bool) {
	release, ok = n.holdLarge(len(f.raw))
	if !ok {
		return nil, nil, false // closing
	}
	m, err := protocol.DecodeJSONShared(f.raw)
	if err != nil {
		release()
		n.log.Debug("a frame that is not a document; ending the stream", "remote", remote.ShortString(), "err", err.Error())
		n.durable.refused(f.raw, remote, nil, err)
		return nil, nil, false
	}
	return m, release, true
}

// errServeStopped is pump's answer when serve gave up on the stream.
var errServeStopped = errors.New("serving stopped")

// maxBatch bounds the frames served together from one stream.
const maxBatch = 256

// localAgent is the peer the node-wide budget charges what the local agent sends: the bodies
// the local API reads (HoldLocal).
const localAgent = peer.ID("local agent")

// HoldLocal charges size bytes that the local agent is sending the node (a request body the
// local API is about to read, and what the node builds from it) to the node-wide budget, as
// the share of one more peer, so that large bodies posted at once take their turn with the
// frames peers send rather than add to them. It waits until they fit or ctx ends, and returns
// what gives them back once the request is handled.
func (n *wire) holdLocal(ctx context.Context, size int64) (release func(), err error) {
	var held int64 // the request's own bytes, as a stream's
	if err := n.budget.acquire(ctx, localAgent, &held, size); err != nil {
		return nil, err
	}
	return func() { n.budget.release(localAgent, &held, size) }, nil
}
