package node

import (
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/store"
)

// Durable records are the state of what stands on the node (package workflow keeps a
// workflow's steps there), in the node's store: opaque values under a kind and an id, at most
// store.MaxRecordBytes each and store.MaxRecordsPerKind of a kind. They need durable delivery,
// which keeps the store; without it noRecords stands in and refuses each call.

// recordStore keeps the durable records: the store, or noRecords.
type recordStore interface {
	PutRecord(kind, id string, v []byte) error
	Records(kind string) (map[string][]byte, error)
	DeleteRecord(kind, id string) error
}

// recordsOf returns where the records are kept: st, or noRecords when there is no store.
func recordsOf(st *store.Store) recordStore {
	if st == nil {
		return noRecords{}
	}
	return st
}

// noRecords stands in for the store when durable delivery is off.
type noRecords struct{}

func errNoStore(what string) error {
	return protocol.Errorf(protocol.CodeCapabilityMismatch, "%s needs the node's store, which is off: start the node with durable delivery on (durable: true)", what)
}

func (noRecords) PutRecord(string, string, []byte) error { return errNoStore("keeping a record") }

func (noRecords) Records(string) (map[string][]byte, error) {
	return nil, errNoStore("reading records")
}

func (noRecords) DeleteRecord(string, string) error { return errNoStore("deleting a record") }
