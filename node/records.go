package node

import "github.com/iacp-node/iacp-node/protocol"

// Durable records are the state of what stands on the node (package workflow keeps a
// workflow's steps there), in the node's store: opaque values under a kind and an id, at most
// store.MaxRecordBytes each and store.MaxRecordsPerKind of a kind. They need durable delivery,
// which keeps the store.

func errNoStore(what string) error {
	return protocol.Errorf(protocol.CodeCapabilityMismatch, "%s needs the node's store, which is off: start the node with durable delivery on (durable: true)", what)
}

// PutRecord stores v as the record id of kind and returns once it is on disk.
func (n *Node) PutRecord(kind, id string, v []byte) error { return n.durable.putRecord(kind, id, v) }

// Records returns every record of kind, by id.
func (n *Node) Records(kind string) (map[string][]byte, error) { return n.durable.records(kind) }

// DeleteRecord removes a record.
func (n *Node) DeleteRecord(kind, id string) error { return n.durable.deleteRecord(kind, id) }
