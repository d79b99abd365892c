package node

import (
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/trust"
)

// inStream is the server side of one /iacp/1.0.0 stream. Frames are read by pump's reader
// and served by handleStream's goroutine; replies may be written by handler goroutines,
// serialised by wmu.
type inStream struct {
	n      *wire
	s      network.Stream
	remote peer.ID
	rid    string // remote.String(), computed once
	wmu    sync.Mutex
	// deadline is the stream's write deadline; guarded by wmu.
	deadline lazyDeadline
	// batch holds ids of accepted messages whose receipt is not yet sent; it is flushed when
	// no further frame is already buffered, so that a burst gets one receipt. Guarded by wmu.
	batch     []*protocol.Message
	exchanges sync.WaitGroup // requests still inside their receipt window
	// closeAfter says that serving stopped after answering a peer over its rate: the stream
	// is closed (the answer reaches the peer, nothing more is read) rather than reset. Set and
	// read by the serving goroutine only.
	closeAfter bool
	// opened holds the frames of the batch being served that are decoded and charged, their
	// signatures not yet checked, and sigs their checks (serveAll): kept from batch to batch
	// so that serving allocates neither, and used by the serving goroutine only.
	opened []openedFrame
	sigs   []error
}

// handleStream serves one inbound stream: every frame is checked, answered with an error, a
// receipt or (quickly) a response, and handed to the agent.
func (n *wire) handleStream(s network.Stream) {
	if !n.life.track() {
		s.Reset()
		return
	}
	defer n.life.done()
	in := &inStream{n: n, s: s, remote: s.Conn().RemotePeer(), deadline: lazyDeadline{set: s.SetWriteDeadline}}
	in.rid = in.remote.String()
	n.sessionsMu.Lock()
	n.inbound[in] = struct{}{}
	n.sessionsMu.Unlock()
	if n.life.isClosing() {
		// Close began after track and may have closed the read sides of the inbound streams
		// before this one was listed: its frames not yet read get no receipt, as theirs.
		_ = s.CloseRead()
	}
	defer func() {
		n.sessionsMu.Lock()
		delete(n.inbound, in)
		n.sessionsMu.Unlock()
	}()
	err := n.pump(s, in.remote, in.serveAll, in.flush)
	in.exchanges.Wait()
	in.flush()
	switch {
	case errors.Is(err, errServeStopped) && in.closeAfter:
		s.Close()
	case errors.Is(err, errServeStopped):
		s.Reset()
	case errors.Is(err, io.EOF) || isTimeout(err) || n.life.isClosing():
		// The peer finished, the stream idled out, or we are closing: a clean end.
		s.Close()
	default:
		n.log.Debug("resetting inbound stream", "remote", in.remote.ShortString(), "err", err.Error())
		s.Reset()
	}
}

// inbound is one message of a batch on its way to the agent.
type inbound struct {
	m             *protocol.Message
	raw           []byte
	peer          peer.ID
	arm           func() // a request's receipt window
	start, cancel func()
}

// serveAll checks a batch of frames in order, routes what passes, accepts the routed
// messages in one store transaction and hands them over. It returns false when the stream
// must end after the frames before: a frame that is not a document (reset), or a peer over
// its rate (answered once, then closed).
//
// The frames are decoded and charged one by one; their signatures are then checked together,
// on every core (verifyAll), and everything that reads or changes state (the replay window,
// trust, routing, refusals) runs for each in order. A signature check is 70 % of what the node
// spends on a message, and one goroutine serving a busy stream was the ceiling of one-way
// throughput while a core stood idle. A large frame holds the node's one large-frame slot
// until its signature is checked, so it is checked with the frames before it, and the slot is
// given back before any of them is admitted (admitting may write to the peer).
func (in *inStream) serveAll(frames []frame) bool {
	n := in.n
	var batch []inbound
	ok := true
	for _, f := range frames {
		m, release, decoded := n.openFrame(f, in.remote)
		if !decoded {
			ok = false
			break
		}
		if err := in.gate(m, f); err != nil {
			release()
			in.checkOpened(&batch)
			n.quiet.Info(string(in.remote), "peer over its rate; answered once, the stream ends", "remote", in.remote.ShortString(), "err", err.Error())
			n.durable.refused(f.raw, in.remote, m, err)
			in.replyError(m, err)
			in.closeAfter = true
			ok = false
			break
		}
		in.opened = append(in.opened, openedFrame{m: m, raw: f.raw})
		if len(f.raw) >= largeFrame {
			in.verifyOpened()
			release() // the slot covers decoding and verifying, never a write to the peer
			in.admitOpened(&batch)
		}
	}
	in.checkOpened(&batch)
	if len(batch) == 0 {
		return ok
	}
	dups, errs := n.durable.accept(batch)
	for i, ib := range batch {
		switch {
		case dups[i]:
			ib.cancel()
			if a, ok := n.answered.lookup(ib.m, n.Now()); ok {
				in.write(a) // a resent request gets the answer its agent gave (answered.go)
				continue
			}
			in.replyError(ib.m, &protocol.Error{Code: protocol.CodeDuplicate, Message: "message " + ib.m.Envelope.MessageID + " was already accepted"})
		case errs[i] != nil:
			ib.cancel()
			in.refuse(ib.m, ib.raw, errs[i])
		default:
			if ib.arm != nil {
				ib.arm()
			}
			ib.start()
			if ib.arm == nil {
				in.queueReceipt(ib.m)
			}
		}
	}
	return ok
}

// openedFrame is a frame decoded and charged to its peer, its signature not yet checked.
type openedFrame struct {
	m   *protocol.Message
	raw []byte
}

// checkOpened checks the signatures of the opened frames together, then admits each in order.
func (in *inStream) checkOpened(batch *[]inbound) {
	in.verifyOpened()
	in.admitOpened(batch)
}

// verifyOpened checks the signatures of the opened frames (verifyAll) into in.sigs.
func (in *inStream) verifyOpened() {
	in.sigs = in.n.verifyAll(in.opened, in.sigs)
}

// admitOpened runs the checks and the routing of each opened frame in order, its signature
// check being in.sigs[i], adding what passes to batch; it then empties in.opened.
func (in *inStream) admitOpened(batch *[]inbound) {
	for i, o := range in.opened {
		if ib, pass := in.admit(o.m, o.raw, in.sigs[i]); pass {
			*batch = append(*batch, ib)
		}
	}
	clear(in.opened) // keep no message of this batch past it
	clear(in.sigs)
	in.opened = in.opened[:0]
}

// verifyAll returns, in sigs (resized), the signature check of each opened message, checked on
// up to GOMAXPROCS goroutines at once: this one and helpers it waits for. A check reads no
// state but the Verifier's caches, which are safe for concurrent use.
func (n *wire) verifyAll(opened []openedFrame, sigs []error) []error {
	if cap(sigs) < len(opened) {
		sigs = make([]error, len(opened))
	}
	out := sigs[:len(opened)] // never reassigned: the helpers capture it by value
	parts := min(runtime.GOMAXPROCS(0), len(opened))
	if parts <= 1 {
		n.verifyRange(opened, out, 0, len(opened))
		return out
	}
	var wg sync.WaitGroup
	for p := 1; p < parts; p++ {
		wg.Go(func() { n.verifyRange(opened, out, p*len(opened)/parts, (p+1)*len(opened)/parts) })
	}
	n.verifyRange(opened, out, 0, len(opened)/parts)
	wg.Wait()
	return out
}

// verifyRange checks the signatures of opened[from:to] into sigs[from:to].
func (n *wire) verifyRange(opened []openedFrame, sigs []error, from, to int) {
	for i := from; i < to; i++ {
		sigs[i] = n.cfg.Verifier.Verify(opened[i].m)
	}
}

// gate charges a frame to its peer's rates: a frame that took the peer over its byte rate,
// or an unsolicited message over its message rate, is refused with RATE_LIMITED. Replies the
// node is waiting for are not charged: they answer what it sent.
func (in *inStream) gate(m *protocol.Message, f frame) error {
	n := in.n
	now := n.now()
	if f.overRate {
		return &protocol.Error{Code: protocol.CodeRateLimited, RetryAfter: n.rate.retryAfter(in.remote, now),
			Message: "peer " + in.rid + " exceeds its byte rate; this stream is closed"}
	}
	if n.solicited(m, in.remote) {
		return nil
	}
	return n.rate.allow(in.remote, now)
}

// admit runs the checks and the routing of one message whose signature check gave sig; pass
// is false when it was refused (and answered) or taken as a reply.
func (in *inStream) admit(m *protocol.Message, raw []byte, sig error) (ib inbound, pass bool) {
	n := in.n
	if err := n.checkSigned(m, len(raw), in.remote, in.rid, sig); err != nil {
		if protocol.CodeOf(err) == protocol.CodeDuplicate {
			if a, ok := n.answered.lookup(m, n.Now()); ok {
				in.write(a) // a resent request gets the answer its agent gave (answered.go)
				return ib, false
			}
			n.log.Debug("duplicate refused", "id", m.Envelope.MessageID)
		} else {
			n.quiet.Info(string(in.remote), "message refused", "id", m.Envelope.MessageID, "from", m.Envelope.Sender.AgentID, "peer", in.remote, "code", protocol.CodeOf(err), "err", err.Error())
		}
		n.durable.refused(raw, in.remote, m, err)
		in.replyError(m, err)
		return ib, false
	}
	n.mesh.watch(m.Envelope.Sender.AgentID, in.remote)
	isReply := m.Message.Type == protocol.TypeResponse || m.Message.Type == protocol.TypeError
	if isReply && n.matchReply(m, in.remote) {
		n.peers.bind(m.Envelope.Sender.AgentID, in.remote)
		if receiptOf(m) == nil {
			in.queueReceipt(m)
		}
		return ib, false
	}
	r := &Request{Msg: m, Peer: in.remote, n: n, size: len(raw)}
	ib = inbound{m: m, raw: raw, peer: in.remote}
	if m.Message.Type == protocol.TypeRequest {
		// A reply within the receipt window goes back on this stream and is the receipt;
		// otherwise a pending receipt goes when the window closes and the reply later, out
		// of band.
		ex := &exchange{in: in}
		r.ex = ex
		ib.arm = func() {
			in.exchanges.Add(1)
			ex.timer = time.AfterFunc(n.cfg.ReceiptWindow, func() {
				if ex.state.CompareAndSwap(exWaiting, exReceipted) {
					in.sendReceipt(m)
				}
				in.exchanges.Done()
			})
		}
	}
	start, cancel, err := n.route(r)
	if err != nil {
		in.refuse(m, raw, err)
		return ib, false
	}
	ib.start, ib.cancel = start, cancel
	return ib, true
}

// refuse answers an accepted-then-undeliverable message with an error and forgets its id, so
// that the sender's retry is not taken for a replay.
func (in *inStream) refuse(m *protocol.Message, raw []byte, err error) {
	in.n.replay.Remove(m.Envelope.MessageID)
	in.n.durable.refused(raw, in.remote, m, err)
	in.replyError(m, err)
}

// exchange tracks whether a request was answered inside its receipt window.
type exchange struct {
	in    *inStream
	timer *time.Timer
	state atomic.Int32
}

const (
	exWaiting   = iota // handler running, nothing sent
	exInline           // answered on the stream within the window
	exReceipted        // pending receipt sent; the answer goes out of band
)

// checkSigned runs every inbound rule in order, and returns the first failure as an
// *protocol.Error. The caller verified the signature itself, with sig its result, so that
// the costly part runs under the large-frame slot and the rest outside it. The order puts the
// cheap rules first, and the replay window last so that a refused message does not burn its
// id. It learns nothing: a message that passes is bound to its peer (trust pin, directory)
// only once it is accepted or taken as a reply (bind), and a message that fails leaves no
// state behind. (The peer's rates are charged before, by the stream's gate.)
func (n *wire) checkSigned(m *protocol.Message, size int, remote peer.ID, remoteID string, sig error) error {
	now := n.now()
	if err := protocol.CheckVersion(m.Envelope.Version); err != nil {
		return err
	}
	if sig != nil {
		return sig
	}
	if m.Envelope.Sender.PeerID != remoteID {
		return protocol.Errorf(protocol.CodeIdentityInvalid, "sender.peer_id %s is not the authenticated remote peer %s", m.Envelope.Sender.PeerID, remote)
	}
	if err := protocol.Validate(m, now, size, n.limits); err != nil {
		return err
	}
	if err := n.trust.Claim(n.ctx, m.Envelope.Sender.AgentID, remote, trust.SourceMessage); err != nil {
		return err
	}
	if !protocol.MatchAgent(m.Envelope.Recipient.AgentID, n.cfg.AgentID) {
		return protocol.Errorf(protocol.CodeAgentNotFound, "this node serves %s, not %s", n.cfg.AgentID, m.Envelope.Recipient.AgentID)
	}
	if err := n.policy.check(m.Envelope.Sender.AgentID, m.Message.Type, m.Message.Intent); err != nil {
		return err
	}
	if err := n.trust.Authorize(m, remote); err != nil {
		return err
	}
	err := n.replay.Add(m.Envelope.MessageID, remoteID, m.Expires(), now)
	if protocol.CodeOf(err) == protocol.CodeDuplicate && n.awaitsAnswer(m, remote) {
		return nil // the first answer again, to the same request sent again (answered.go)
	}
	return err
}

// awaitsAnswer reports whether m answers a request of this node that is still waiting for
// its answer from remote. A request sent again with its own id (after a restart) is answered
// with the answer its recipient gave the first time, whose id this node may have seen: the
// waiter takes it once, as any answer.
func (n *wire) awaitsAnswer(m *protocol.Message, remote peer.ID) bool {
	if m.Message.Type != protocol.TypeResponse && m.Message.Type != protocol.TypeError {
		return false
	}
	n.waitersMu.Lock()
	defer n.waitersMu.Unlock()
	w, ok := n.waiters[m.Envelope.CorrelationID]
	return ok && w.peer == remote && !closed(w.done)
}

// solicited reports whether m is a reply the node is still waiting for from remote: a
// receipt for a message whose receipt has not come, or an answer to a request that has none
// yet. Such frames answer what the node sent and are not charged to the peer's message rate,
// each waiter for at most replyCredit of them: solicited looks at the unverified document
// (check verifies it afterwards), and a peer repeating a claim, with signatures that fail or
// not, must not get verifications for free.
func (n *wire) solicited(m *protocol.Message, remote peer.ID) bool {
	if m.Message.Type != protocol.TypeResponse && m.Message.Type != protocol.TypeError {
		return false
	}
	ids := receiptOf(m)
	n.waitersMu.Lock()
	defer n.waitersMu.Unlock()
	spend := func(w *waiter) bool {
		if w.credit == 0 {
			return false
		}
		w.credit--
		return true
	}
	for _, id := range ids {
		if w, ok := n.waiters[id]; ok && w.peer == remote && !closed(w.receipted) && spend(w) {
			return true
		}
	}
	w, ok := n.waiters[m.Envelope.CorrelationID]
	return ok && w.peer == remote && !closed(w.done) && spend(w)
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// receiptBody is the payload of a receipt.
type receiptBody struct {
	Detail  string     `json:"detail"`
	Receipt receiptIDs `json:"receipt"`
}

type receiptIDs struct {
	MessageIDs []string `json:"message_ids"`
}

// pendingWord is the status of a receipt, as its payload spells it.
var pendingWord = []byte(protocol.ResponsePending)
