package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/iacp-node/iacp-node/coord"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// sseBuffer is the gossip subscription's buffer; a client slower than that loses items (the
// stream says how many in a "dropped" comment).
const sseBuffer = 256

// EventFilter selects what the event stream carries.
type EventFilter struct {
	// Kinds: event, group, heartbeat, transition, message; empty means all.
	Kinds []string
	// AgentID keeps only items from or about this agent.
	AgentID string
	// Group keeps only group items of this capability (other kinds pass).
	Group string
}

func filterFromParams(r *http.Request) (EventFilter, error) {
	v := r.URL.Query()
	f := EventFilter{Kinds: list(v, "kinds"), AgentID: v.Get("agent"), Group: v.Get("group")}
	for _, k := range f.Kinds {
		switch k {
		case KindEvent, KindGroup, KindHeartbeat, KindTransition, KindMessage, KindTrust, KindBreaker, KindApproval:
		default:
			return f, errorf(protocol.CodePayloadInvalid, "kinds=%q: use event, group, heartbeat, transition, message, trust.conflict, breaker or approval", k)
		}
	}
	return f, nil
}

func (f EventFilter) wants(kind string) bool {
	return len(f.Kinds) == 0 || slices.Contains(f.Kinds, kind)
}

// events is a Server-Sent Events stream of gossip events, group messages, heartbeats,
// liveness transitions, inbound-message notices, trust conflicts and approval changes, filtered by ?kinds=,
// ?agent= and ?group=. Each SSE event is named by its kind and carries an EventItem as JSON.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	f, err := filterFromParams(r)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	var items <-chan *node.EventItem
	sub := s.subscribeGossip(f)
	if sub != nil {
		defer sub.Cancel()
		items = sub.C()
	}
	ib := s.n.Inbox()
	fs := s.followLocal(f)
	out := s.openSSE(w)
	if out == nil {
		return
	}
	keep := time.NewTicker(s.cfg.sseKeepAlive)
	defer keep.Stop()
	ok := true
	for ok {
		select {
		case <-r.Context().Done():
			return
		case <-keep.C:
			ok = out.keepAlive(sub)
		case it, open := <-items:
			if !open {
				items = nil // gossip closed; inbound notices continue
				continue
			}
			ok = out.emit(gossipItem(it))
		case <-fs.trust.changed:
			var cs []node.TrustConflict
			cs, _, fs.trust.changed = s.n.Trust().Conflicts(fs.trust.after)
			fs.trust.after, ok = emitConflicts(out, f, cs, fs.trust.after)
		case <-fs.breakers.changed:
			var ts []coord.BreakerTransition
			ts, _, fs.breakers.changed = s.coord.Transitions(fs.breakers.after)
			fs.breakers.after, ok = emitBreakers(out, f, ts, fs.breakers.after)
		case <-fs.approvals.changed:
			var es []node.ApprovalEvent
			es, _, fs.approvals.changed = s.n.Approvals().Events(fs.approvals.after)
			fs.approvals.after, ok = emitApprovals(out, f, es, fs.approvals.after)
		case <-fs.inbox.changed:
			fs.inbox.changed = ib.Changed()
			fs.inbox.after, ok = emitInbound(out, f, ib.List(fs.inbox.after), fs.inbox.after)
		}
	}
}

// feed follows one of the node's own event logs: the cursor of the last entry streamed, and
// the channel that says there are entries past it. A nil channel (a kind not wanted) never
// fires.
type feed struct {
	changed <-chan struct{}
	after   uint64
}

// localFeeds are the logs an event stream follows besides gossip: inbound messages, trust
// conflicts, breaker transitions and approval changes.
type localFeeds struct{ inbox, trust, breakers, approvals feed }

// followLocal starts following, from now on, the logs of the kinds f wants.
func (s *Server) followLocal(f EventFilter) localFeeds {
	var fs localFeeds
	if f.wants(KindMessage) {
		ib := s.n.Inbox()
		fs.inbox.changed = ib.Changed()
		fs.inbox.after = ib.LastSeq() // notices are for arrivals from now on
	}
	if f.wants(KindTrust) {
		_, fs.trust.after, fs.trust.changed = s.n.Trust().Conflicts(^uint64(0)) // conflicts from now on
	}
	if f.wants(KindBreaker) {
		_, fs.breakers.after, fs.breakers.changed = s.coord.Transitions(^uint64(0)) // transitions from now on
	}
	if f.wants(KindApproval) {
		_, fs.approvals.after, fs.approvals.changed = s.n.Approvals().Events(^uint64(0)) // from now on
	}
	return fs
}

// subscribeGossip subscribes to the gossip kinds f wants, or returns nil when it wants none
// or gossip is off.
func (s *Server) subscribeGossip(f EventFilter) *node.Subscription {
	if !s.n.GossipOn() || !(f.wants(KindEvent) || f.wants(KindGroup) || f.wants(KindHeartbeat) || f.wants(KindTransition)) {
		return nil
	}
	pf := node.EventFilter{AgentID: f.AgentID, Group: f.Group}
	for _, k := range f.Kinds {
		switch k {
		case KindEvent:
			pf.Kinds = append(pf.Kinds, node.EventKindEvent)
		case KindGroup:
			pf.Kinds = append(pf.Kinds, node.EventKindGroup)
		case KindHeartbeat:
			pf.Kinds = append(pf.Kinds, node.EventKindHeartbeat)
		case KindTransition:
			pf.Kinds = append(pf.Kinds, node.EventKindTransition)
		}
	}
	sub, err := s.n.Subscribe(pf, sseBuffer)
	if err != nil {
		return nil
	}
	return sub
}

// sseStream writes one Server-Sent Events stream, each write bounded by timeout.
type sseStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	id      uint64 // of the last event written
	dropped uint64 // the subscription's drops last reported
}

// openSSE starts the stream: headers and a first comment. It returns nil when the client is
// gone already. The stream outlives any request deadline: it reads nothing (no read
// deadline), and it bounds each of its writes by the ping timeout.
func (s *Server) openSSE(w http.ResponseWriter) *sseStream {
	out := &sseStream{w: w, rc: http.NewResponseController(w), timeout: s.cfg.pingTimeout}
	_ = out.rc.SetReadDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if !out.comment("iacp-node event stream") {
		return nil
	}
	return out
}

// emit writes one event; false means the client is gone.
func (o *sseStream) emit(it EventItem) bool {
	raw, err := json.Marshal(it)
	if err != nil {
		return true
	}
	o.id++
	_ = o.rc.SetWriteDeadline(time.Now().Add(o.timeout))
	if _, err := fmt.Fprintf(o.w, "id: %d\nevent: %s\ndata: %s\n\n", o.id, it.Kind, raw); err != nil {
		return false
	}
	return o.rc.Flush() == nil
}

// comment writes an SSE comment line; false means the client is gone.
func (o *sseStream) comment(text string) bool {
	_ = o.rc.SetWriteDeadline(time.Now().Add(o.timeout))
	if _, err := fmt.Fprintf(o.w, ": %s\n\n", text); err != nil {
		return false
	}
	return o.rc.Flush() == nil
}

// keepAlive writes the periodic comment, which says how many items the subscription dropped
// since the last one when it dropped any (the client reads too slowly).
func (o *sseStream) keepAlive(sub *node.Subscription) bool {
	if sub != nil && sub.Dropped() != o.dropped {
		o.dropped = sub.Dropped()
		return o.comment(fmt.Sprintf("dropped %d items (client too slow)", o.dropped))
	}
	return o.comment("keep-alive")
}

// emitConflicts writes the trust conflicts f selects and returns the seq of the last one seen.
func emitConflicts(out *sseStream, f EventFilter, cs []node.TrustConflict, after uint64) (uint64, bool) {
	for _, c := range cs {
		after = c.Seq
		if f.AgentID != "" && c.AgentID != f.AgentID {
			continue
		}
		if !out.emit(EventItem{Kind: KindTrust, At: c.At, AgentID: c.AgentID, PeerID: c.Claimant.String(), Conflict: &c}) {
			return after, false
		}
	}
	return after, true
}

// emitBreakers writes the breaker transitions f selects and returns the seq of the last one seen.
func emitBreakers(out *sseStream, f EventFilter, ts []coord.BreakerTransition, after uint64) (uint64, bool) {
	for _, t := range ts {
		after = t.Seq
		if f.AgentID != "" && t.AgentID != f.AgentID {
			continue
		}
		if !out.emit(EventItem{Kind: KindBreaker, At: t.At, AgentID: t.AgentID, Breaker: &t}) {
			return after, false
		}
	}
	return after, true
}

// emitInbound writes a notice of each inbound message f selects and returns the inbox seq of
// the last one seen.
func emitInbound(out *sseStream, f EventFilter, ds []node.Delivery, after uint64) (uint64, bool) {
	for _, d := range ds {
		after = d.Seq
		m := d.Msg
		if f.AgentID != "" && m.Envelope.Sender.AgentID != f.AgentID {
			continue
		}
		if !out.emit(EventItem{Kind: KindMessage, At: d.Received, AgentID: m.Envelope.Sender.AgentID, PeerID: d.Peer.String(),
			Inbound: &InboundNotice{Seq: d.Seq, MessageID: m.Envelope.MessageID, Type: m.Message.Type,
				Intent: string(m.Message.Intent), Channel: m.Envelope.Recipient.Channel}}) {
			return after, false
		}
	}
	return after, true
}

func gossipItem(it *node.EventItem) EventItem {
	e := EventItem{Kind: strings.ToLower(it.Kind.String()), At: time.Now().UTC(), PeerID: it.Author.String(), Message: it.Message}
	if it.Message != nil {
		e.AgentID = it.Message.Envelope.Sender.AgentID
		if t, err := it.Message.Time(); err == nil {
			e.At = t
		}
	}
	switch it.Kind {
	case node.EventKindEvent:
		ev := it.Event
		e.Event = &ev
	case node.EventKindGroup:
		e.Group = it.Group
	case node.EventKindHeartbeat:
		hb := it.Heartbeat
		e.Heartbeat = &hb
	case node.EventKindTransition:
		tr := it.Transition
		e.AgentID, e.PeerID, e.At = tr.AgentID, tr.PeerID.String(), tr.At
		e.Transition = &TransitionDoc{From: string(tr.From), To: string(tr.To), Reason: tr.Reason}
	}
	return e
}
