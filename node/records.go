package node

import "github.com/iacp-node/iacp-node/protocol"

// Durable records are the state of what stands on the node (package workflow keeps a
// workflow's steps there), in the node's store: opaque values under a kind and an id, at most
// store.MaxRecordBytes each and store.MaxRecordsPerKind of a kind. They need durable delivery,
// which keeps the store: without it the durable part's keepNothing refuses each call.

func errNoStore(what string) error {
	return protocol.Errorf(protocol.CodeCapabilityMismatch, "%s needs the node's store, which is off: start the node with durable delivery on (durable: true)", what)
}
