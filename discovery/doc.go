// Package discovery finds IACP agents on the mesh: a Kademlia DHT under a private protocol
// prefix, signed agent records that bind an agent id to a peer id and its addresses, capability
// advertisement as DHT provider records, capability queries ranked by preference and live load,
// a directory cache so that repeated lookups do not walk the DHT, and a direct record protocol
// (<prefix>/agent-record/1.0.0) on which a node serves its own signed record, so that a capability
// lookup asks each provider for its record instead of walking the DHT once per provider.
//
// A Discovery is built and started by New around a libp2p host and the node's Ed25519 key (the
// key of the host's peer id), with options, as pubsub.New and node.New are: the bootstrap loop
// begins at once. Publish advertises the local agent; Resolve, FindByCapability and Query look
// other agents up; Leave withdraws the local agent; Close stops everything New started. What the DHT stores for other peers is bounded, and charged to the
// peer that signed or provides it (WithMaxStoredRecords, WithMaxStoredBytes,
// WithMaxStoredPerPeer; StoreStats). The record format, the DHT keys, every timing, the ranking
// order and the store's eviction rules are described in docs/discovery.md.
//
// The package depends only on protocol/, internal/retry and libp2p. It does no IACP messaging: the node composes
// it and dials what Resolve and Query return.
package discovery
