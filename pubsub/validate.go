package pubsub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
	ps "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"
)

// groupField is the recipient extension member that names the group of a group message. The
// signature covers it, so a group message cannot be replayed into another group's topic.
const groupField = "group"

// validated is what the validator hands to delivery through ps.Message.ValidatorData.
type validated struct {
	doc      *protocol.Message
	event    protocol.EventPayload
	hb       protocol.HeartbeatPayload
	interval time.Duration
	cert     string // the certificate a heartbeat carries (WithCertificate)
	group    string
}

// errVerdict carries why a message was refused and whether it is an Ignore.
type errVerdict struct {
	ignore bool
	err    error
}

func (e *errVerdict) Error() string { return e.err.Error() }
func (e *errVerdict) Unwrap() error { return e.err }

func reject(format string, args ...any) error {
	return &errVerdict{err: fmt.Errorf(format, args...)}
}

func ignore(format string, args ...any) error {
	return &errVerdict{ignore: true, err: fmt.Errorf(format, args...)}
}

// validator returns the topic validator of one topic.
func (g *Gossip) validator(info topicInfo) ps.ValidatorEx {
	return func(ctx context.Context, _ peer.ID, m *ps.Message) ps.ValidationResult {
		v, err := g.check(ctx, info, m)
		if err == nil {
			m.ValidatorData = v
			return ps.ValidationAccept
		}
		var ev *errVerdict
		isIgnore := errors.As(err, &ev) && ev.ignore
		g.log.Debug("gossip message refused", "topic", info.name, "author", m.GetFrom(),
			"relayer", m.ReceivedFrom, "ignored", isIgnore, "err", err)
		if isIgnore {
			g.stats.ignored.Add(1)
			return ps.ValidationIgnore
		}
		g.stats.rejected.Add(1)
		return ps.ValidationReject
	}
}

// check applies every rule to one message; cheap rules first. A rule whose outcome may
// depend on the receiver's view (rate, expiry at the boundary, a full replay window) ignores
// a message relayed by a third party instead of rejecting it, so that an honest relayer is
// never punished for another node's timing.
//
// gossipsub does not sign (see routerOptions): the pubsub author (From) is only a claim until
// the IACP signature of the document, made by sender.peer_id, is verified and sender.peer_id
// is found equal to it. Every rule that needs no cryptography runs before the signature check,
// and nothing before the end may charge the claimed author: the rate bucket is drawn last,
// just before the message is recorded as seen, so that a forger (or a replayer of the
// author's own documents, re-encoded) cannot spend an honest author's budget.
func (g *Gossip) check(ctx context.Context, info topicInfo, m *ps.Message) (*validated, error) {
	claimed := m.GetFrom()
	if len(m.Data) > protocol.MaxGossipBytes {
		return nil, reject("message is %d bytes; the gossip limit is %d", len(m.Data), protocol.MaxGossipBytes)
	}
	now := g.cfg.clock()
	doc, err := protocol.DecodeJSON(m.Data)
	if err != nil {
		return nil, reject("decode: %w", err)
	}
	_, author, err := g.cfg.verifier.SenderKey(doc) // from its key cache, after the author's first message
	if err != nil || author != claimed {
		return nil, reject("sender.peer_id %q is not the pubsub author %s", doc.Envelope.Sender.PeerID, claimed)
	}
	// A message_id already accepted is a duplicate whatever its bytes, so it costs no
	// signature check: re-encoded (another gossipsub id, which hashes the bytes), or replayed
	// after gossipsub's own seen-cache forgot it. The author is not blamed: anyone can
	// re-encode its document and race the genuine copy.
	if g.replay.Seen(doc.Envelope.MessageID, now) {
		return nil, duplicate(doc)
	}
	relayed := m.ReceivedFrom != author
	// MaxTTL: gossip carries messages for at most MaxGossipTTL (a longer TTL is rejected).
	if err := protocol.Validate(doc, now, len(m.Data), protocol.Limits{MaxMessageBytes: protocol.MaxGossipBytes, MaxTTL: MaxGossipTTL}); err != nil {
		late := now.Sub(doc.Expires())
		if protocol.CodeOf(err) == protocol.CodeTimeout && relayed && late < protocol.DefaultMaxClockSkew {
			return nil, ignore("expired %s ago while relayed: %w", late, err)
		}
		return nil, reject("validate: %w", err)
	}
	v := &validated{doc: doc}
	if err := g.checkTopic(info, v); err != nil {
		return nil, err
	}
	if shun := g.cfg.authorShun; shun != nil && v.cert == "" && shun(author, m.ReceivedFrom) {
		return nil, ignore("author %s: its certificate would not come now (it failed, or its peer stalled, recently)", author)
	}
	if err := g.authentic(ctx, info, v, author, m.ReceivedFrom); err != nil {
		return nil, err
	}
	if !g.limiter.allow(author, now) {
		if relayed {
			return nil, ignore("author %s is over its rate (relayed)", author)
		}
		return nil, reject("author %s is over its rate of %v/s", author, g.cfg.peerRate)
	}
	if err := g.replay.Add(doc.Envelope.MessageID, m.ReceivedFrom.String(), doc.Expires(), now); err != nil {
		if errors.Is(err, protocol.ErrDuplicate) { // another encoding won a concurrent validation
			return nil, duplicate(doc)
		}
		return nil, ignore("replay window: %w", err)
	}
	return v, nil
}

// authentic checks the signature of a document whose author claim was checked, then that the
// author speaks for its sender agent id (WithAuthorCheck, with the certificate a heartbeat
// carries, asking via when it must), and for a heartbeat that the liveness table lets it speak
// for that agent.
func (g *Gossip) authentic(ctx context.Context, info topicInfo, v *validated, author, via peer.ID) error {
	doc := v.doc
	if err := g.cfg.verifier.Verify(doc); err != nil {
		return reject("signature: %w", err)
	}
	id := doc.Envelope.Sender.AgentID
	if check := g.cfg.authorCheck; check != nil {
		ctx, cancel := context.WithTimeout(ctx, AuthorCheckWait)
		err := check(ctx, AuthorClaim{AgentID: id, Author: author, Via: via, Certificate: v.cert})
		cancel()
		switch {
		case err == nil:
		case errors.Is(err, ErrNotCertified) && via == author:
			return reject("agent %s: %w", id, err)
		default:
			return ignore("no verified certificate binds agent %s to %s (yet): %w", id, author, err)
		}
	}
	if info.kind != kindHeartbeat {
		return nil
	}
	if id == g.b.AgentID() && author != g.h.ID() {
		// Never bound in our own table, or our own validator would refuse our own beats.
		return ignore("agent %s is this node's own; %s speaks for it", id, g.h.ID())
	}
	g.stateMu.Lock()
	ok := g.live.Accepts(id, author)
	g.stateMu.Unlock()
	if !ok {
		return ignore("agent %s is bound to another peer", id)
	}
	return nil
}

// duplicate is the verdict on a document, claimed by its own author, whose message_id was
// already accepted: an ignore. (A document re-published under another peer's name never gets
// here: its author claim is rejected first.)
func duplicate(doc *protocol.Message) error {
	return &errVerdict{ignore: true, err: fmt.Errorf("duplicate: message %s: %w", doc.Envelope.MessageID, protocol.ErrDuplicate)}
}

// checkTopic checks that the document belongs on the topic it came on, and decodes the
// payload the topic implies.
func (g *Gossip) checkTopic(info topicInfo, v *validated) error {
	env, body := &v.doc.Envelope, &v.doc.Message
	group, hasGroup, err := groupOf(v.doc)
	if err != nil {
		return reject("%w", err)
	}
	if env.Recipient.AgentID != protocol.Broadcast {
		return reject("recipient %q on %s: gossip carries messages to \"*\" only", env.Recipient.AgentID, info.name)
	}
	switch info.kind {
	case kindBroadcast:
		if body.Type != protocol.TypeEvent || hasGroup {
			return reject("a %s (group %q) on the broadcast topic, which carries events to every agent", body.Type, group)
		}
		if err := protocol.DecodePayload(v.doc, &v.event); err != nil {
			return reject("%w", err)
		}
	case kindHeartbeat:
		if body.Type != protocol.TypeHeartbeat || env.Recipient.Channel != protocol.ChannelHealth || hasGroup {
			return reject("a %s on channel %q on the heartbeat topic", body.Type, env.Recipient.Channel)
		}
		var wire heartbeatWire
		if err := protocol.DecodePayload(v.doc, &wire); err != nil {
			return reject("%w", err)
		}
		v.hb, v.cert = wire.HeartbeatPayload, internCert(wire.Certificate)
		if s := wire.IntervalSeconds; s > 0 {
			v.interval = min(max(time.Duration(s*float64(time.Second)), MinHeartbeatInterval), MaxMeshInterval)
		}
	case kindGroup:
		if body.Type != protocol.TypeRequest && body.Type != protocol.TypeEvent {
			return reject("a %s on group topic %s", body.Type, info.name)
		}
		if group != info.group {
			return reject("a message for group %q on the topic of group %q", group, info.group)
		}
		v.group = group
	}
	return nil
}

// groupOf returns the recipient.group extension of a document.
func groupOf(m *protocol.Message) (string, bool, error) {
	raw, ok := m.Envelope.Recipient.Extra[groupField]
	if !ok {
		return "", false, nil
	}
	var g string
	if err := json.Unmarshal(raw, &g); err != nil {
		return "", true, fmt.Errorf("recipient.%s is not a string", groupField)
	}
	return g, true, nil
}

// heartbeatWire is the heartbeat payload with this implementation's extension members:
// interval_seconds, the sender's beat, so that receivers time its silence by its own interval,
// and certificate.
type heartbeatWire struct {
	protocol.HeartbeatPayload
	IntervalSeconds float64 `json:"interval_seconds,omitempty"`
	// Certificate is the sender's agent certificate (authority mode, WithCertificate), so that
	// a node hearing it for the first time needs no exchange to check who it is.
	Certificate string `json:"certificate,omitempty"`
}

// maxLimiters bounds the per-author buckets; beyond it, idle buckets are pruned first and
// messages of new authors are ignored until room frees.
const maxLimiters = 1 << 16

// limiterIdle is how long an unused bucket is kept.
const limiterIdle = 10 * time.Minute

// limiterPruneEvery spaces the periodic sweeps of idle buckets: one sweep visits every author
// heard in the last limiterIdle, and once a second that was a measurable share of a large
// mesh's CPU for nothing (a bucket lives ten minutes).
const limiterPruneEvery = time.Minute

// limiter is a token bucket per pubsub author. Its map is guarded by mu; validators run
// concurrently.
type limiter struct {
	mu      sync.Mutex
	r       rate.Limit
	burst   int
	buckets map[peer.ID]*bucket
	pruned  time.Time // last periodic sweep
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time
}

func newLimiter(r rate.Limit, burst int) *limiter {
	return &limiter{r: r, burst: burst, buckets: make(map[peer.ID]*bucket)}
}

func (l *limiter) allow(p peer.ID, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[p]
	if !ok {
		if len(l.buckets) >= maxLimiters {
			l.pruneLocked(now)
			if len(l.buckets) >= maxLimiters {
				return false
			}
		}
		b = &bucket{lim: rate.NewLimiter(l.r, l.burst)}
		l.buckets[p] = b
	}
	b.last = now
	return b.lim.AllowN(now, 1)
}

// prune drops the buckets idle for limiterIdle, at most once every limiterPruneEvery.
func (l *limiter) prune(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.pruned) < limiterPruneEvery {
		return
	}
	l.pruned = now
	l.pruneLocked(now)
}

func (l *limiter) pruneLocked(now time.Time) {
	for p, b := range l.buckets {
		if now.Sub(b.last) > limiterIdle {
			delete(l.buckets, p)
		}
	}
}

// certs interns the certificates heartbeats carry. A node keeps each agent's certificate in
// its certificate book; interned, the nodes of one process (the simulator's) keep one copy of
// each agent's where each would keep its own (700 bytes an agent at every node: 0.7 GB at
// 1000 nodes). The references are strong (unique.Make's weak ones let a copy go at the next
// collection, and the next beat make another), so the table is bounded: past certsKept
// entries it starts afresh. Guarded by its mutex.
var certs = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

// certsKept bounds certs: the certificates of 16,384 agents, about 11 MB.
const certsKept = 1 << 14

// internCert returns the process's copy of cert, making cert that copy if there is none.
func internCert(cert string) string {
	if cert == "" {
		return cert
	}
	certs.Lock()
	defer certs.Unlock()
	if kept, ok := certs.m[cert]; ok {
		return kept
	}
	if len(certs.m) >= certsKept {
		clear(certs.m)
	}
	certs.m[cert] = cert
	return cert
}
