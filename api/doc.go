// Package api is the node's local agent API: the IACP HTTP and WebSocket bindings
// (POST /.well-known/iacp/v1/message, GET /.well-known/iacp/v1/connect), webhook delivery to
// agents that are HTTP servers themselves, REST endpoints for the rest of the node (status,
// agents, discover, resolve, peers, outbox, inbox), a Server-Sent Events stream, /metrics and
// /healthz. The Go client is package apiclient; the calls whose documents are the node's own
// types (trust, coordination, workflows, approvals, conversations, events) are typed here, as
// functions over an apiclient.Client (calls.go).
//
// The server listens on 127.0.0.1:9700 by default (IaCP 1.0 section 5.1 puts the local API
// in 9000-9999) and requires a bearer token read from <data-dir>/api.token (mode 0600). While
// it runs it writes its listen address to <data-dir>/api.addr, so that clients find it. It
// refuses a listen address off loopback unless WithAllowRemote allows it, and on loopback it
// answers only requests addressed to a loopback name (DNS rebinding). Reading a request,
// writing an answer and the number of connections are bounded (options.go).
// docs/api.md describes every endpoint; docs/openapi.yaml is checked against the routes.
package api
