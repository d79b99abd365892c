package api

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
				if s.cfg.outbox == nil {
					return 0
				}
				es, err := s.cfg.outbox.List()
				if err != nil {
					return -1
				}
				return float64(len(es))
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "iacp_peers", Help: "Connected libp2p peers."},
			func() float64 { return float64(len(n.Host().Network().Peers())) }),
	}
	m.reg.MustRegister(append(gauges, m.sent, m.received, m.errors, m.latency)...)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) serve(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }

// Registry returns the server's metrics registry, for a caller that serves it elsewhere.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }
