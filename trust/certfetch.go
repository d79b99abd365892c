package trust

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"
	msmux "github.com/multiformats/go-multistream"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/protocol"
)

// CertProtocolID is the protocol on which a node hands out agent certificates: its own, and
// any other it verified. A node that relayed a heartbeat verified its author's certificate
// before it did, so the receiver can ask the relayer for it even when it has no connection to
// the author. The answer also carries the newest revocation list when the asker's is older.
const CertProtocolID = "/iacp/cert/1.0.0"

// The certificate protocol's bounds. Whoever makes the node fetch a certificate, the author of
// a message or the peer that relayed it, could answer slowly or never: what one such peer can
// make the node wait for is bounded per peer, so that stallers never hold what honest peers
// need.
const (
	certTimeout    = 5 * time.Second  // one exchange, dial included
	maxCertRequest = 512              // a request is a peer id and a number
	certRetryAfter = 30 * time.Second // a peer whose certificate failed is not asked again sooner
	maxCertAnswer  = authority.MaxCertBytes + authority.MaxCRLBytes + 256
	// certFetchers bounds the fetches under way at once, node-wide: beside the budget of each
	// peer, a bound on what many peers together hold.
	certFetchers = 64
	// certFetchesPerPeer bounds the fetches under way at once through one peer: a relayer of
	// messages by made-up authors, each needing its own fetch, holds at most this many.
	certFetchesPerPeer = 2
	// certWaiters bounds the callers that wait for one fetch under way: the messages of one
	// author arriving while its certificate is fetched. More are refused at once (with a code
	// to retry after), so that one staller's messages cannot pile up in gossipsub's bounded
	// validation of a topic while its fetch runs into the deadline.
	certWaiters = 8
	// stallMemory is how long a peer that did not answer a certificate request within its
	// deadline is not asked again: its messages that need a fetch are refused at once (with a
	// code senders retry after) instead of each waiting for the deadline again.
	stallMemory = 10 * time.Second
)

// pendingFetch is one fetch under way (certBook.inflight): done closes when it ends, and
// waiters counts the callers waiting for it.
type pendingFetch struct {
	done    chan struct{}
	waiters int
}

type certRequest struct {
	// Peer is whose certificate is asked for; "" means the answering node's own.
	Peer string `json:"peer,omitempty"`
	// CRLSeq is the asker's revocation-list seq: a newer list comes with the answer.
	CRLSeq uint64 `json:"crl_seq"`
}

type certAnswer struct {
	Cert string `json:"cert,omitempty"`
	CRL  string `json:"crl,omitempty"`
}

// verify returns nil when p holds a valid certificate for agentID, fetching it from via (p
// itself when via is "") if the book has none. It waits at most certTimeout, or until ctx ends.
// Gossip validators call it too (pubsub.WithAuthorCheck), with a shorter bound: a message whose
// author's certificate is not held yet waits for it, so that it is neither lost nor left
// unrelayed, unless via already stalled or holds its budget of fetches.
func (b *certBook) verify(ctx context.Context, agentID string, p, via peer.ID) error {
	return b.verifyAs(ctx, agentID, p, via, false)
}

// verifyRecipient is verify for a message this node sends to p: the node chose p, so p's
// answer is not charged to it nor bounded as a stranger's would be (the node's own sends
// to one agent may all wait for one fetch), and a slow answer is not remembered as a stall.
func (b *certBook) verifyRecipient(ctx context.Context, agentID string, p peer.ID) error {
	return b.verifyAs(ctx, agentID, p, p, true)
}

func (b *certBook) verifyAs(ctx context.Context, agentID string, p, via peer.ID, ours bool) error {
	err := b.check(agentID, p)
	if !errors.Is(err, errNoCert) {
		return err
	}
	if via == "" {
		via = p
	}
	ctx, cancel := context.WithTimeout(ctx, certTimeout)
	defer cancel()
	if err := b.fetch(ctx, p, via, ours); err != nil {
		return err
	}
	if err := b.check(agentID, p); !errors.Is(err, errNoCert) {
		return err
	}
	// The fetch this call waited for, another caller's, reached no verdict.
	return protocol.Errorf(protocol.CodeAgentNotFound, "no certificate of peer %s yet: it could not be fetched; try again", p)
}

// verifyCarried is verify for a message that carries raw, its author's certificate ("" for
// none): a certificate the book does not hold is checked from raw, without an exchange, and
// fetched from via only when raw is missing or does not bind agentID to p.
func (b *certBook) verifyCarried(ctx context.Context, agentID string, p, via peer.ID, raw string) error {
	if err := b.check(agentID, p); !errors.Is(err, errNoCert) {
		return err
	}
	if raw != "" && b.checkRaw(raw, agentID, p) == nil {
		return b.check(agentID, p)
	}
	return b.verify(ctx, agentID, p, via)
}

// fetch asks via for p's certificate, verifies it and keeps it. One fetch per peer runs at a
// time; a second caller waits for the first. Before anything is sent, via is charged: its
// message rate pays for the request, a via that stalled within stallMemory is not asked, and
// via may have certFetchesPerPeer fetches under way; then a node-wide slot is taken. A fetch
// for the node's own send (ours) is none of a stranger's doing: it is neither charged nor
// bounded per peer, and its timeout is not remembered as a stall.
func (b *certBook) fetch(ctx context.Context, p, via peer.ID, ours bool) error {
	b.mu.Lock()
	if f, ok := b.inflight[p]; ok {
		return b.await(ctx, f, p, ours) // unlocks
	}
	if !ours {
		if err := b.chargeLocked(via); err != nil {
			b.mu.Unlock()
			return err
		}
	}
	ch := make(chan struct{})
	b.inflight[p] = &pendingFetch{done: ch}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.inflight, p)
		if !ours {
			if b.pending[via]--; b.pending[via] == 0 {
				delete(b.pending, via)
			}
		}
		b.mu.Unlock()
		close(ch)
	}()
	select {
	case b.slots <- struct{}{}:
		defer func() { <-b.slots }()
	case <-ctx.Done():
		return protocol.Errorf(protocol.CodeTimeout, "certificate of peer %s: %v", p, ctx.Err()) // no verdict
	}
	ans, err := b.ask(ctx, p, via)
	if err != nil && !isAnswer(err) {
		// Not reaching via (no route, a reset stream, a timeout under load) says nothing
		// about p's certificate: the error is one a sender tries again after, and nothing is
		// remembered of p. A durable message to an agent that is down waits for it in the
		// outbox. A via that took the whole deadline is remembered, for stallMemory.
		code := protocol.CodeAgentNotFound
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
			code = protocol.CodeTimeout
			if !ours {
				b.stalled.Add(via, b.now())
			}
		}
		return protocol.Errorf(code, "cannot fetch the certificate of peer %s: %v", p, err)
	}
	return b.judge(ans, err, p, via)
}

// await waits, holding one of its certWaiters (unless ours), for the fetch f of p's
// certificate that another caller runs; b.mu is held, and released.
func (b *certBook) await(ctx context.Context, f *pendingFetch, p peer.ID, ours bool) error {
	if n := f.waiters; n >= certWaiters && !ours {
		b.mu.Unlock()
		return protocol.Errorf(protocol.CodeTimeout, "%d messages of peer %s wait for its certificate already; try again", n, p)
	}
	f.waiters++
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		f.waiters--
		b.mu.Unlock()
	}()
	select {
	case <-f.done:
		return nil // the caller checks the book again
	case <-ctx.Done():
		return protocol.Errorf(protocol.CodeTimeout, "certificate of peer %s: %v", p, ctx.Err()) // no verdict
	}
}

// judge takes via's answer for p (err: what it was, when not a certificate): a newer
// revocation list it carries is applied, a valid certificate admitted, anything else is p's
// refusal, remembered when p answered for itself.
func (b *certBook) judge(ans certAnswer, err error, p, via peer.ID) error {
	if err == nil && ans.CRL != "" {
		if err := b.applyRevocations(ans.CRL); err != nil {
			b.log.Warn("revocation list refused", "from", via, "err", err.Error())
		}
	}
	if err == nil {
		var c *authority.Certificate
		if c, err = b.v.Certificate(ans.Cert, p, ""); err == nil {
			return b.admit(c)
		}
	}
	err = protocol.Errorf(protocol.CodeIdentityInvalid, "peer %s has no valid certificate from mesh authority %s: %v", p, b.v.MeshID(), err)
	// Only p's own answer is a verdict on p, remembered for certRetryAfter: a relayer
	// answering with a bad certificate (or none) must not get p refused.
	if via == p {
		b.failed.Add(p, failure{at: b.now(), err: err})
	}
	return err
}

// shunned reports whether a message of author relayed by via, carrying no certificate, would
// be refused at once: the book holds no certificate of author, and either author's failed
// within certRetryAfter, or the fetch would go to a peer that stalled within stallMemory
// (author itself, or via, whom a fetch asks first). Cheap: three cache lookups.
func (b *certBook) shunned(author, via peer.ID) bool {
	if _, ok := b.byPeer.Peek(author); ok {
		return false
	}
	now := b.now()
	if f, ok := b.failed.Peek(author); ok && now.Sub(f.at) < certRetryAfter {
		return true
	}
	at, ok := b.stalled.Peek(via)
	return ok && now.Sub(at) < stallMemory
}

// chargeLocked takes one of via's certFetchesPerPeer, after its message rate paid for the
// request, unless via stalled within stallMemory. b.mu is held.
func (b *certBook) chargeLocked(via peer.ID) error {
	if at, ok := b.stalled.Peek(via); ok {
		if again := at.Add(stallMemory); b.now().Before(again) {
			return protocol.Errorf(protocol.CodeTimeout, "peer %s did not answer a certificate request in time; it is asked again from %s", via, again.UTC().Format(time.RFC3339))
		}
		b.stalled.Remove(via)
	}
	if b.pending[via] >= certFetchesPerPeer {
		return protocol.Errorf(protocol.CodeTimeout, "%d certificate requests to peer %s are under way already; try again", b.pending[via], via)
	}
	if err := b.allow(via); err != nil {
		return err
	}
	b.pending[via]++
	return nil
}

// isAnswer reports whether err, from ask, is via's answer (it does not speak the certificate
// protocol, or its answer is too large or not JSON) rather than a failure to reach it. A peer
// whose protocols identify listed may be asked with lazy negotiation: its refusal of the
// protocol can then come back as a reset stream, which counts as not reached.
func isAnswer(err error) bool {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return errors.Is(err, msmux.ErrNotSupported[libp2pproto.ID]{}) || errors.Is(err, protocol.ErrFrameTooLarge) ||
		errors.Is(err, protocol.ErrEmptyFrame) || errors.As(err, &syntax) || errors.As(err, &typ)
}

// ask runs one exchange of the certificate protocol with via.
func (b *certBook) ask(ctx context.Context, p, via peer.ID) (certAnswer, error) {
	var ans certAnswer
	req := certRequest{CRLSeq: b.v.RevocationSeq()}
	if p != via {
		req.Peer = p.String()
	}
	if err := askOnce(ctx, b.h, via, CertProtocolID, certTimeout, req, maxCertAnswer, &ans); err != nil {
		return ans, fmt.Errorf("certificate exchange with %s: %w", via, err)
	}
	return ans, nil
}

// serve answers one certificate request.
func (b *certBook) serve(s network.Stream) {
	defer s.Close()
	if b.allow(s.Conn().RemotePeer()) != nil {
		s.Reset()
		return
	}
	_ = s.SetDeadline(time.Now().Add(certTimeout))
	body, err := protocol.ReadFrame(s, maxCertRequest)
	if err != nil {
		s.Reset()
		return
	}
	var req certRequest
	if json.Unmarshal(body, &req) != nil {
		s.Reset()
		return
	}
	var ans certAnswer
	want := b.self
	if req.Peer != "" {
		if want, err = peer.Decode(req.Peer); err != nil {
			s.Reset()
			return
		}
	}
	if c, ok := b.byPeer.Peek(want); ok {
		ans.Cert = c.Raw
	} else if own := b.own.Load(); want == b.self && own != nil {
		// check drops the node's own certificate from byPeer once it expired; it is still
		// the one to show, so that the asker names why it refuses it (expired).
		ans.Cert = own.Raw
	}
	if req.CRLSeq < b.v.RevocationSeq() {
		ans.CRL = b.v.CurrentRevocations()
	}
	raw, _ := json.Marshal(ans)
	if protocol.WriteFrame(s, raw) != nil {
		s.Reset()
	}
}
