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
