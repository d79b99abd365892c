package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// lookupTimeout bounds discovery and resolve calls that carry no ?timeout.
const lookupTimeout = 10 * time.Second

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	write(w, r, http.StatusOK, Health{Status: "ok", AgentID: s.n.AgentID()})
}

func (s *Server) getStatus(w http.ResponseWriter, r *http.Request) {
	doc := StatusDoc{
		AgentID:         s.n.AgentID(),
		PeerID:          s.n.ID().String(),
		Addrs:           addrStrings(s.n.Addrs()),
		Manifest:        s.n.Manifest(),
		Status:          s.n.Status(),
		UptimeSeconds:   s.n.Manifest().UptimeSeconds,
		Peers:           s.n.PeerCount(),
		InboxDepth:      s.n.Inbox().Len(),
		Inbox:           s.n.Config().Inbox,
		MaxMessageBytes: s.n.Config().MaxMessageBytes,
		Gossip:          s.n.GossipOn(),
		Webhook:         s.cfg.webhook,
	}
	doc.Safety = safetyDoc(s.n.Safety())
	if st, ok := s.n.DiscoveryStatus(); ok {
		doc.Discovery = &DiscoveryStatus{
			Mode: st.Mode, Bootstrapped: st.Bootstrapped, BootstrapConfigured: st.BootstrapConfigured,
			BootstrapAnswered: st.BootstrapAnswered, RoutingTableSize: st.RoutingTableSize,
			CachedAgents: st.CachedAgents, Published: st.Published, LastError: st.LastError,
		}
	}
	write(w, r, http.StatusOK, doc)
}

func safetyDoc(sf node.Safety) SafetyDoc {
	d := SafetyDoc{
		QueueBytes: sf.Queue.Bytes, QueuePeakBytes: sf.Queue.PeakBytes, QueuePeakPeerBytes: sf.Queue.PeakPeerBytes,
		ReplayIDs: sf.ReplayIDs, ReplayCapacity: sf.ReplayCapacity, ReplayEvicted: sf.ReplayEvicted,
		Pins: sf.Pins, Agents: sf.Agents, InboxBytes: sf.InboxBytes, InboxMaxBytes: sf.InboxMaxBytes,
		LocalHealth: sf.LocalHealth.Score, GossipRejected: sf.Gossip.Rejected, GossipIgnored: sf.Gossip.Ignored,
		DHTRecords: sf.DHTStore.Entries, DHTBytes: sf.DHTStore.Bytes, DHTEvicted: sf.DHTStore.EvictedQuota + sf.DHTStore.EvictedFull,
	}
	if sf.AuditBroken != nil {
		d.AuditBroken = sf.AuditBroken.Error()
	}
	return d
}

func (s *Server) getAgents(w http.ResponseWriter, r *http.Request) {
	doc := AgentsDoc{Agents: []AgentDoc{}, Breakers: s.coord.Breakers()}
	if !s.n.GossipOn() {
		doc.Note = "gossip is off on this node: no heartbeats, so no liveness table"
		write(w, r, http.StatusOK, doc)
		return
	}
	for _, a := range s.n.Agents() {
		d := AgentDoc{
			AgentID: a.AgentID, PeerID: a.PeerID.String(), State: string(a.State), LastSeen: a.LastSeen,
			Load: a.Load, ActiveTasks: a.ActiveTasks, Version: a.Version,
			Watched: a.Watched, StalenessSeconds: a.Staleness.Seconds(),
		}
		if b, ok := s.coord.Breaker(a.AgentID); ok {
			d.Circuit = string(b.State)
		}
		doc.Agents = append(doc.Agents, d)
	}
	write(w, r, http.StatusOK, doc)
}

// discover runs a capability query: GET with query parameters (tool, model, domain,
// prefer_tool, prefer_model, prefer_domain, each repeatable or comma-separated; locality;
// max_latency_ms) or POST with a capability query document.
func (s *Server) discover(w http.ResponseWriter, r *http.Request) {
	if !s.n.DiscoveryOn() {
		s.fail(w, r, errDiscoveryOff(), "")
		return
	}
	var q protocol.CapabilityQuery
	if r.Method == http.MethodPost {
		if !s.readInto(w, r, &q) {
			return
		}
	} else {
		var err error
		if q, err = queryFromParams(r); err != nil {
			s.fail(w, r, err, "")
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), lookupTimeout)
	defer cancel()
	matches, err := s.n.Query(ctx, q)
	if err != nil {
		s.fail(w, r, asIACP(err, protocol.CodePayloadInvalid), "")
		return
	}
	doc := DiscoverDoc{Query: q, Matches: []MatchDoc{}}
	for _, m := range matches {
		md := MatchDoc{RecordDoc: recordDoc(m.Record), PreferredMatches: m.PreferredMatches}
		if m.LoadKnown {
			l := m.Load
			md.Load = &l
		}
		if m.LatencyKnown {
			ms := float64(m.Latency) / float64(time.Millisecond)
			md.LatencyMs = &ms
		}
		doc.Matches = append(doc.Matches, md)
	}
	write(w, r, http.StatusOK, doc)
}

func (s *Server) resolve(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("agent_id")
	if err := protocol.ValidateAgentID(id); err != nil {
		s.fail(w, r, err, "")
		return
	}
	if !s.n.DiscoveryOn() {
		s.fail(w, r, errDiscoveryOff(), "")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), lookupTimeout)
	defer cancel()
	rec, err := s.n.Resolve(ctx, id)
	if err != nil {
		s.fail(w, r, asIACP(err, protocol.CodeAgentNotFound), "")
		return
	}
	write(w, r, http.StatusOK, recordDoc(rec))
}

func (s *Server) getPeers(w http.ResponseWriter, r *http.Request) {
	st := s.n.NAT()
	doc := PeersDoc{Peers: []PeerDoc{}, NAT: NATDoc{
		Reachability: st.Reachability, Advertised: addrStrings(st.Advertised), Reachable: addrStrings(st.Reachable),
		Relays: []string{}, HolePunchesSucceeded: st.HolePunchesSucceeded, HolePunchesFailed: st.HolePunchesFailed,
	}}
	for _, r := range st.Relays {
		doc.NAT.Relays = append(doc.NAT.Relays, r.String())
	}
	for _, p := range s.n.Peers() {
		pd := PeerDoc{PeerID: p.ID.String(), Addrs: addrStrings(p.Addrs), Path: p.Path}
		if p.Latency > 0 {
			ms := float64(p.Latency) / float64(time.Millisecond)
			pd.LatencyMs = &ms
		}
		doc.Peers = append(doc.Peers, pd)
	}
	write(w, r, http.StatusOK, doc)
}

func (s *Server) getOutbox(w http.ResponseWriter, r *http.Request) {
	doc := OutboxDoc{Entries: []OutboxItem{}}
	if !s.n.Config().Durable {
		doc.Note = "durable delivery is off on this node: messages are sent directly and nothing is queued"
		write(w, r, http.StatusOK, doc)
		return
	}
	doc.Durable = true
	es, err := s.n.OutboxEntries()
	if err != nil {
		s.fail(w, r, errorf(protocol.CodeInternalError, "list outbox: %w", err), "")
		return
	}
	for _, e := range es {
		doc.Entries = append(doc.Entries, OutboxItem{
			MessageID: e.MessageID, Recipient: e.Recipient, Seq: e.Seq, EnqueuedAt: e.EnqueuedAt,
			ExpiresAt: e.ExpiresAt, Attempts: e.Attempts, NextAttemptAt: e.NextAttemptAt, LastError: e.LastError,
		})
	}
	write(w, r, http.StatusOK, doc)
}

// cancelOutbox takes a queued message out of the outbox (DELETE /v1/outbox/{message_id}): it
// is not sent again. 404 when the outbox does not hold it, 409 without durable delivery.
func (s *Server) cancelOutbox(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("message_id")
	if !s.n.Config().Durable {
		s.fail(w, r, &httpError{status: http.StatusConflict, err: errorf(protocol.CodeCapabilityMismatch,
			"durable delivery is off on this node: nothing is queued, so there is nothing to cancel")}, id)
		return
	}
	ok, err := s.n.CancelOutbox(id)
	if err != nil {
		s.fail(w, r, errorf(protocol.CodeInternalError, "cancel %s: %w", id, err), id)
		return
	}
	if !ok {
		s.fail(w, r, &httpError{status: http.StatusNotFound, err: errorf(protocol.CodePayloadInvalid,
			"message %s is not in the outbox (delivered, refused, expired or cancelled already, or never queued); list it with GET /v1/outbox", id)}, id)
		return
	}
	write(w, r, http.StatusOK, CancelResult{Cancelled: id})
}

func recordDoc(rec node.Record) RecordDoc {
	return RecordDoc{AgentID: rec.AgentID, PeerID: rec.PeerID.String(), Addrs: addrStrings(rec.Addrs), Manifest: rec.Manifest, Expires: rec.Expires}
}

func addrStrings(as []ma.Multiaddr) []string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		out = append(out, a.String())
	}
	return out
}

func errDiscoveryOff() error {
	return &httpError{status: http.StatusServiceUnavailable, err: errorf(protocol.CodeCapabilityMismatch,
		"discovery is off on this node: start it with discovery on to query the DHT")}
}

// asIACP keeps an *protocol.Error, and gives any other error the code def.
func asIACP(err error, def protocol.Code) error {
	if _, ok := err.(*protocol.Error); ok || protocol.CodeOf(err) != protocol.CodeInternalError {
		return err
	}
	return &protocol.Error{Code: def, Message: err.Error(), Err: err}
}

func parseUint(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, errorf(protocol.CodePayloadInvalid, "%q is not a non-negative integer", s)
	}
	return v, nil
}
