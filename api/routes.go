package api

import "net/http"

// Paths of the IACP bindings (Internet-Draft "Transport Bindings").
const (
	// MessagePath is the HTTP binding: POST a message here.
	MessagePath = "/.well-known/iacp/v1/message"
	// ConnectPath is the WebSocket binding.
	ConnectPath = "/.well-known/iacp/v1/connect"
	// AuthTokenPath is where an agent obtains an A2ACP token (specs/003, "Token
	// Acquisition"), at the draft's own path.
	AuthTokenPath = "/auth/token"
)

// Route is one endpoint of the server: what docs/openapi.yaml must describe.
type Route struct {
	Method string
	// Path is a net/http pattern path; {name} is a path parameter, as in OpenAPI.
	Path string
	// Auth says whether the bearer token is required.
	Auth bool
	// Stream marks long-lived answers (WebSocket, SSE), left out of the latency histogram.
	Stream  bool
	handler http.HandlerFunc
}

// Routes returns every endpoint the server registers.
func (s *Server) Routes() []Route { return s.routes() }

func (s *Server) routes() []Route {
	return []Route{
		{Method: "POST", Path: MessagePath, Auth: true, handler: s.postMessage},
		{Method: "GET", Path: ConnectPath, Auth: true, Stream: true, handler: s.connect},
		{Method: "POST", Path: "/v1/broadcast", Auth: true, handler: s.postBroadcast},
		{Method: "POST", Path: "/v1/ask", Auth: true, handler: s.postAsk},
		{Method: "GET", Path: "/v1/status", Auth: true, handler: s.getStatus},
		{Method: "GET", Path: "/v1/agents", Auth: true, handler: s.getAgents},
		{Method: "GET", Path: "/v1/discover", Auth: true, handler: s.discover},
		{Method: "POST", Path: "/v1/discover", Auth: true, handler: s.discover},
		{Method: "GET", Path: "/v1/resolve/{agent_id}", Auth: true, handler: s.resolve},
		{Method: "GET", Path: "/v1/peers", Auth: true, handler: s.getPeers},
		{Method: "GET", Path: "/v1/outbox", Auth: true, handler: s.getOutbox},
		{Method: "DELETE", Path: "/v1/outbox/{message_id}", Auth: true, handler: s.cancelOutbox},
		{Method: "GET", Path: "/v1/inbox", Auth: true, handler: s.getInbox},
		{Method: "POST", Path: "/v1/inbox/{message_id}/ack", Auth: true, handler: s.ackInbox},
		{Method: "GET", Path: "/v1/conversations/{id}", Auth: true, handler: s.getConversation},
		{Method: "GET", Path: "/v1/trust", Auth: true, handler: s.getTrust},
		{Method: "POST", Path: "/v1/trust/forget", Auth: true, handler: s.forgetTrust},
		{Method: "POST", Path: "/v1/trust/invites", Auth: true, handler: s.invite},
		{Method: "POST", Path: "/v1/trust/revoke", Auth: true, handler: s.revoke},
		{Method: "GET", Path: "/v1/trust/certificates", Auth: true, handler: s.certificates},
		{Method: "POST", Path: AuthTokenPath, Auth: true, handler: s.authToken},
		{Method: "GET", Path: "/v1/approvals", Auth: true, handler: s.getApprovals},
		{Method: "POST", Path: "/v1/approvals/{message_id}/approve", Auth: true, handler: s.approve},
		{Method: "POST", Path: "/v1/approvals/{message_id}/reject", Auth: true, handler: s.reject},
		{Method: "GET", Path: "/v1/events", Auth: true, Stream: true, handler: s.events},
		{Method: "POST", Path: "/v1/coord/any", Auth: true, handler: s.coordAny},
		{Method: "POST", Path: "/v1/coord/fallback", Auth: true, handler: s.coordFallback},
		{Method: "POST", Path: "/v1/coord/scatter", Auth: true, handler: s.coordScatter},
		{Method: "POST", Path: "/v1/coord/pipeline", Auth: true, handler: s.coordPipeline},
		{Method: "POST", Path: "/v1/workflows", Auth: true, handler: s.postWorkflow},
		{Method: "GET", Path: "/v1/workflows", Auth: true, handler: s.getWorkflows},
		{Method: "GET", Path: "/v1/workflows/{id}", Auth: true, handler: s.getWorkflow},
		{Method: "POST", Path: "/v1/workflows/{id}/cancel", Auth: true, handler: s.cancelWorkflow},
		{Method: "GET", Path: "/metrics", Auth: false, handler: s.metrics.serve},
		{Method: "GET", Path: "/healthz", Auth: false, handler: s.healthz},
	}
}
