package api

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/iacp-node/iacp-node/coord"
	"github.com/iacp-node/iacp-node/node"
)

// metrics is the server's own Prometheus registry (never the global one, so that many nodes
// in one process each have theirs).
type metrics struct {
	reg      *prometheus.Registry
	sent     prometheus.Counter
	received *prometheus.CounterVec
	errors   *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	handler  http.Handler
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.sent = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "iacp_api_messages_sent_total", Help: "Messages the agent sent through the API that the node delivered (receipt, response or publication).",
	})
	m.received = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "iacp_api_messages_received_total", Help: "Inbound messages the agent took, by how: ws, webhook or pull.",
	}, []string{"via"})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "iacp_api_errors_total", Help: "Error answers of the API, by IACP code.",
	}, []string{"code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "iacp_api_request_duration_seconds", Help: "Latency of API requests (streams excluded), by route.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 12), // 0.5 ms .. ~30 s
	}, []string{"route"})
	n := s.n
	gauges := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "iacp_inbox_depth", Help: "Inbound messages waiting for the agent."},
			func() float64 { return float64(n.Inbox().Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "iacp_outbox_depth", Help: "Outgoing messages waiting in the durable outbox (0 when it is off)."},
			func() float64 {
				es, err := n.OutboxEntries()
				if err != nil {
					return -1
				}
				return float64(len(es))
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "iacp_peers", Help: "Connected libp2p peers."},
			func() float64 { return float64(n.PeerCount()) }),
	}
	gauges = append(gauges, safetyGauges(n)...)
	gauges = append(gauges, breakerGauges(s.coord)...)
	m.reg.MustRegister(append(gauges, m.sent, m.received, m.errors, m.latency)...)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// safetyGauges expose node.Safety: what the node's bounds hold and refused (docs/security.md).
func safetyGauges(n *node.Node) []prometheus.Collector {
	g := func(name, help string, v func(node.Safety) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return v(n.Safety()) })
	}
	return []prometheus.Collector{
		g("iacp_audit_chain_broken", "1 when the audit log's chain was found broken at start (a new anchored segment was started), else 0.",
			func(s node.Safety) float64 { return b2f(s.AuditBroken != nil) }),
		g("iacp_queue_bytes", "Bytes of frames read and not yet served.", func(s node.Safety) float64 { return float64(s.Queue.Bytes) }),
		g("iacp_queue_peak_peer_bytes", "The most bytes of frames ever queued for one peer.",
			func(s node.Safety) float64 { return float64(s.Queue.PeakPeerBytes) }),
		g("iacp_replay_ids", "Message ids in the replay window.", func(s node.Safety) float64 { return float64(s.ReplayIDs) }),
		g("iacp_replay_evicted", "Replay window ids forgotten early to make room for another peer's.",
			func(s node.Safety) float64 { return float64(s.ReplayEvicted) }),
		g("iacp_trust_pins", "Trust-on-first-use pins held.", func(s node.Safety) float64 { return float64(s.Pins) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "iacp_trust_conflicts_total",
			Help: "Claims on agent ids bound to another peer (trust.conflict events)."},
			func() float64 { return float64(n.Safety().TrustConflicts) }),
		g("iacp_directory_agents", "Agents in the directory.", func(s node.Safety) float64 { return float64(s.Agents) }),
		g("iacp_inbox_bytes", "Bytes held in the in-memory inbox.", func(s node.Safety) float64 { return float64(s.InboxBytes) }),
		g("iacp_local_health_score", "The node's own timeliness score (0 healthy .. 8): above 0 it suspects others later.",
			func(s node.Safety) float64 { return float64(s.LocalHealth.Score) }),
		g("iacp_gossip_rejected", "Gossip messages rejected by the validators (the relayer is penalised).",
			func(s node.Safety) float64 { return float64(s.Gossip.Rejected) }),
		g("iacp_liveness_evicted", "Liveness rows evicted because the table was full.",
			func(s node.Safety) float64 { return float64(s.Gossip.Evicted) }),
		g("iacp_liveness_agents", "Agents in the liveness table (heard on the heartbeat topic or probed).",
			func(s node.Safety) float64 { return float64(s.Gossip.Agents) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "iacp_mesh_beats_total",
			Help: "Beats this node published on the heartbeat topic."},
			func() float64 { return float64(n.Safety().Gossip.MeshBeats) }),
		g("iacp_mesh_interval_seconds", "The interval this node's beats on the heartbeat topic announce (stretched in a mesh larger than mesh_budget).",
			func(s node.Safety) float64 { return s.Gossip.MeshInterval.Seconds() }),
		g("iacp_dht_records", "Records in the DHT record store.", func(s node.Safety) float64 { return float64(s.DHTStore.Entries) }),
		g("iacp_dht_bytes", "Bytes charged to the DHT record store.", func(s node.Safety) float64 { return float64(s.DHTStore.Bytes) }),
		g("iacp_dht_evicted", "DHT records evicted (a peer over its quota, or the store full).",
			func(s node.Safety) float64 { return float64(s.DHTStore.EvictedQuota + s.DHTStore.EvictedFull) }),
	}
}

// breakerGauges expose the coordinator's circuit breakers (docs/coordination.md).
func breakerGauges(c *coord.Coordinator) []prometheus.Collector {
	var out []prometheus.Collector
	for _, st := range []coord.BreakerState{coord.Closed, coord.Open, coord.HalfOpen} {
		out = append(out, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "iacp_coord_breakers", Help: "Circuit breakers the coordinator keeps, by state.", ConstLabels: prometheus.Labels{"state": string(st)},
		}, func() float64 { return float64(c.BreakerStats().ByState[st]) }))
	}
	return append(out,
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "iacp_coord_breaker_opened_total",
			Help: "How many times a circuit opened after repeated failures."},
			func() float64 { return float64(c.BreakerStats().Opened) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "iacp_coord_breaker_refused_total",
			Help: "Calls an open circuit failed at once (AGENT_NOT_FOUND, circuit open)."},
			func() float64 { return float64(c.BreakerStats().Refused) }),
	)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (m *metrics) serve(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }

// Registry returns the server's metrics registry, for a caller that serves it elsewhere.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }
