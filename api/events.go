package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

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
		case KindEvent, KindGroup, KindHeartbeat, KindTransition, KindMessage, KindTrust:
		default:
			return f, errorf(protocol.CodePayloadInvalid, "kinds=%q: use event, group, heartbeat, transition, message or trust.conflict", k)
		}
	}
	return f, nil
}

func (f EventFilter) wants(kind string) bool {
	return len(f.Kinds) == 0 || slices.Contains(f.Kinds, kind)
}

// events is a Server-Sent Events stream of gossip events, group messages, heartbeats,
// liveness transitions, inbound-message notices and trust conflicts, filtered by ?kinds=, ?agent= and ?group=.
// Each SSE event is named by its kind and carries an EventItem as JSON.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	f, err := filterFromParams(r)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	var items <-chan *node.EventItem
	var sub *node.Subscription
	if s.n.GossipOn() && (f.wants(KindEvent) || f.wants(KindGroup) || f.wants(KindHeartbeat) || f.wants(KindTransition)) {
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
		if sub, err = s.n.Subscribe(pf, sseBuffer); err == nil {
			defer sub.Cancel()
			items = sub.C()
		}
	}
	ib := s.n.Inbox()
	var changed <-chan struct{}
	var after uint64
	if f.wants(KindMessage) {
		changed = ib.Changed()
		after = ib.LastSeq() // notices are for arrivals from now on
	}
	var trustChanged <-chan struct{}
	var trustAfter uint64
	if f.wants(KindTrust) {
		_, trustAfter, trustChanged = s.n.TrustConflicts(^uint64(0)) // conflicts from now on
	}
	// The stream outlives any request deadline: it reads nothing (no read deadline), and it
	// bounds each of its writes by the ping timeout.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.pingTimeout))
	fmt.Fprint(w, ": iacp-node event stream\n\n")
	if rc.Flush() != nil {
		return
	}
	keep := time.NewTicker(s.cfg.sseKeepAlive)
	defer keep.Stop()
	var id uint64
	var dropped uint64
	emit := func(it EventItem) bool {
		raw, err := json.Marshal(it)
		if err != nil {
			return true
		}
		id++
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.pingTimeout))
		if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", id, it.Kind, raw); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keep.C:
			line := ": keep-alive\n\n"
			if sub != nil && sub.Dropped() != dropped {
				dropped = sub.Dropped()
				line = fmt.Sprintf(": dropped %d items (client too slow)\n\n", dropped)
			}
			_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.pingTimeout))
			if _, err := fmt.Fprint(w, line); err != nil || rc.Flush() != nil {
				return
			}
		case it, ok := <-items:
			if !ok {
				items = nil // gossip closed; inbound notices continue
				continue
			}
			if !emit(gossipItem(it)) {
				return
			}
		case <-trustChanged:
			var cs []node.TrustConflict
			cs, _, trustChanged = s.n.TrustConflicts(trustAfter)
			for _, c := range cs {
				trustAfter = c.Seq
				if f.AgentID != "" && c.AgentID != f.AgentID {
					continue
				}
				if !emit(EventItem{Kind: KindTrust, At: c.At, AgentID: c.AgentID, PeerID: c.Claimant.String(), Conflict: &c}) {
					return
				}
			}
		case <-changed:
			changed = ib.Changed()
			for _, d := range ib.List(after) {
				after = d.Seq
				m := d.Msg
				if f.AgentID != "" && m.Envelope.Sender.AgentID != f.AgentID {
					continue
				}
				if !emit(EventItem{Kind: KindMessage, At: d.Received, AgentID: m.Envelope.Sender.AgentID, PeerID: d.Peer.String(),
					Inbound: &InboundNotice{Seq: d.Seq, MessageID: m.Envelope.MessageID, Type: m.Message.Type,
						Intent: string(m.Message.Intent), Channel: m.Envelope.Recipient.Channel}}) {
					return
				}
			}
		}
	}
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
