package api

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/iacp-node/iacp-node/protocol"
)

// queryFromParams builds a capability query from URL parameters: tool, model, domain (required),
// prefer_tool, prefer_model, prefer_domain (preferred), each repeatable or comma-separated;
// locality; max_latency_ms.
func queryFromParams(r *http.Request) (protocol.CapabilityQuery, error) {
	v := r.URL.Query()
	q := protocol.CapabilityQuery{
		Required:  protocol.CapabilitySet{Tools: list(v, "tool"), Models: list(v, "model"), Domains: list(v, "domain")},
		Preferred: protocol.CapabilitySet{Tools: list(v, "prefer_tool"), Models: list(v, "prefer_model"), Domains: list(v, "prefer_domain")},
	}
	q.Constraints.Locality = v.Get("locality")
	if s := v.Get("max_latency_ms"); s != "" {
		ms, err := strconv.Atoi(s)
		if err != nil || ms < 0 {
			return q, errorf(protocol.CodePayloadInvalid, "max_latency_ms=%q must be a non-negative integer", s)
		}
		q.Constraints.MaxLatencyMs = ms
	}
	return q, nil
}

// QueryParams is the inverse of queryFromParams, for clients.
func QueryParams(q protocol.CapabilityQuery) url.Values {
	v := url.Values{}
	add := func(k string, xs []string) {
		for _, x := range xs {
			v.Add(k, x)
		}
	}
	add("tool", q.Required.Tools)
	add("model", q.Required.Models)
	add("domain", q.Required.Domains)
	add("prefer_tool", q.Preferred.Tools)
	add("prefer_model", q.Preferred.Models)
	add("prefer_domain", q.Preferred.Domains)
	if q.Constraints.Locality != "" {
		v.Set("locality", q.Constraints.Locality)
	}
	if q.Constraints.MaxLatencyMs > 0 {
		v.Set("max_latency_ms", strconv.Itoa(q.Constraints.MaxLatencyMs))
	}
	return v
}

func list(v url.Values, key string) []string {
	var out []string
	for _, s := range v[key] {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
