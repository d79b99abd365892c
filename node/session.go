package node

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

// session is the client side of one long-lived /iacp/1.0.0 stream to a peer: many messages
// go out on it and their receipts and quick replies come back on it. Writes are serialised by
// wmu; one goroutine (read) reads. done is closed when the session ends, with err set.
type session struct {
	n    *wire
	peer peer.ID
	pid  string // peer.String(), computed once
	s    network.Stream
	wmu  sync.Mutex
	// deadline is the stream's write deadline; guarded by wmu.
	deadline lazyDeadline
	done     chan struct{}
	once     sync.Once
	err      error
}

// session returns the live session to p, opening one if needed.
func (n *wire) session(ctx context.Context, p peer.ID) (*session, error) {
	n.sessionsMu.Lock()
	s, ok := n.sessions[p]
	n.sessionsMu.Unlock()
	if ok && !n.retireRelayed(s) {
		return s, nil
	}
	dctx, cancel := context.WithTimeout(ctx, n.cfg.FrameTimeout)
	defer cancel()
	st, err := n.host.NewStream(network.WithAllowLimitedConn(dctx, "iacp"), p, ProtocolID)
	if err != nil {
		return nil, err
	}
	s = &session{n: n, peer: p, pid: p.String(), s: st, done: make(chan struct{}), deadline: lazyDeadline{set: st.SetWriteDeadline}}
	n.sessionsMu.Lock()
	if other, ok := n.sessions[p]; ok {
		n.sessionsMu.Unlock()
		// Closed outside the lock: a close waits for the protocol's handshake, a round trip,
		// and every send of the node would wait behind it.
		st.Close()
		return other, nil
	}
	defer n.sessionsMu.Unlock()
	if !n.life.spawn(s.read) {
		st.Reset()
		return nil, errors.New("node is closing")
	}
	n.sessions[p] = s
	return s, nil
}

func (s *session) write(raw []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	select {
	case <-s.done:
		return s.err
	default:
	}
	if err := fitsRelay(s.s, len(raw)); err != nil {
		return err
	}
	s.deadline.extend(time.Now(), s.n.cfg.FrameTimeout)
	if err := protocol.WriteFrame(s.s, raw); err != nil {
		s.end(err, true)
		return err
	}
	return nil
}

// read receives receipts and replies until the stream ends or idles out. Frames are read and
// bounded as on an inbound stream (pump): the same byte budget, the same rates (replies the
// node waits for are not charged). Only replies travel on a session: anything else, a frame
// that is not a document, or a peer over its rate, ends it.
func (s *session) read() {
	err := s.n.pump(s.s, s.peer, s.serveAll, func() {})
	s.end(err, !errors.Is(err, io.EOF) && !isTimeout(err))
}

// serveAll takes the replies of a batch: a reply someone waits for goes to its waiter, a late
// one (its requester stopped waiting) to the agent, all of them in one store commit.
func (s *session) serveAll(frames []frame) bool {
	n := s.n
	var late []inbound
	ok := true
	for _, f := range frames {
		if ok = s.serveOne(f, &late); !ok {
			break
		}
	}
	if len(late) > 0 {
		dups, errs := n.durable.accept(late)
		for i, ib := range late {
			if dups[i] || errs[i] != nil {
				ib.cancel()
				if errs[i] != nil {
					n.replay.Remove(ib.m.Envelope.MessageID)
					n.log.Warn("late reply could not be stored", "id", ib.m.Envelope.MessageID, "err", errs[i].Error())
				}
				continue
			}
			ib.start()
		}
	}
	return ok
}

// serveOne decodes, charges and checks one frame: a reply someone waits for goes to its
// waiter, a late one is routed and added to late. It returns false when the session must end.
func (s *session) serveOne(f frame, late *[]inbound) bool {
	n := s.n
	m, release, ok := n.openFrame(f, s.peer)
	if !ok {
		return false
	}
	if m.Message.Type != protocol.TypeResponse && m.Message.Type != protocol.TypeError {
		release()
		n.durable.refused(f.raw, s.peer, m, protocol.Errorf(protocol.CodePayloadInvalid, "a %s on a session this node opened, where only replies travel", m.Message.Type))
		return false
	}
	if f.overRate {
		release()
		n.durable.refused(f.raw, s.peer, m, protocol.Errorf(protocol.CodeRateLimited, "peer %s exceeds its byte rate; the session ends", s.pid))
		return false
	}
	if !n.solicited(m, s.peer) {
		if err := n.rate.allow(s.peer, n.now()); err != nil {
			release()
			n.durable.refused(f.raw, s.peer, m, err)
			return false
		}
	}
	sig := n.cfg.Verifier.Verify(m)
	release() // the slot covers decoding and verifying only
	if err := n.checkSigned(m, len(f.raw), s.peer, s.pid, sig); err != nil {
		n.quiet.Info(string(s.peer), "reply refused", "from", s.peer.ShortString(), "code", protocol.CodeOf(err), "err", err.Error())
		n.durable.refused(f.raw, s.peer, m, err)
		return true
	}
	if n.matchReply(m, s.peer) {
		n.peers.bind(m.Envelope.Sender.AgentID, s.peer)
		return true
	}
	// A reply nobody waits for any more: the agent gets it like any inbound message.
	start, cancel, err := n.route(&Request{Msg: m, Peer: s.peer, n: n, size: len(f.raw)})
	if err != nil {
		n.replay.Remove(m.Envelope.MessageID)
		n.log.Warn("late reply could not be handed to the agent", "id", m.Envelope.MessageID, "err", err.Error())
		return true
	}
	*late = append(*late, inbound{m: m, raw: f.raw, peer: s.peer, start: start, cancel: cancel})
	return true
}

// end retires the session: reset on failure, a clean close otherwise.
func (s *session) end(err error, reset bool) {
	s.once.Do(func() {
		s.err = err
		s.n.sessionsMu.Lock()
		if s.n.sessions[s.peer] == s {
			delete(s.n.sessions, s.peer)
		}
		s.n.sessionsMu.Unlock()
		if reset {
			s.s.Reset()
		} else {
			s.s.Close()
		}
		close(s.done)
	})
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
