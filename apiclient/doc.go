// Package apiclient is the Go client of a node's local API (docs/api.md): the calls an agent,
// the command line, the MCP server and the A2A bridge make, and the documents they answer
// with. It imports neither the node nor go-libp2p, so that a program built on it (the MCP
// server) carries no mesh code: its documents mirror the API's JSON (the wire format), and a
// test of package api ties each to the server's own. A message comes back as a Message
// whose Raw is the whole signed document: protocol.DecodeJSON(m.Raw) gives every member.
//
// Endpoints whose documents are the node's own Go types (trust, certificates, coordination,
// workflows, approvals, conversations, events) are called with Do, and typed in package api,
// which has those types.
package apiclient
