// Package store is the node's durable delivery state: the outbox of direct messages waiting
// for a receipt, the inbox of accepted messages waiting for the local agent, the persistent
// "seen" set that makes acceptance exactly-once across restarts, and a journal of the gossip
// message ids delivered to the agent.
//
// Everything lives in one bbolt file (<data-dir>/store/store.db by the node's convention),
// with the inbox journal beside it (inbox.journal, journal.go). Put, Ack, Delivered,
// Reschedule, RetryNow and RememberGossip go through the store's group commit (commit.go): a
// write with no commit in flight commits at once, and the writes that arrive during a commit
// share the next one and its fsync. Accept and AcceptAll, on the path of every durable
// request, append to the journal and sync it once (concurrent accepts share the sync); the
// store's one goroutine, the applier, moves journaled messages into bbolt in batches, and
// Open replays the journal. A call that returns nil is on disk and, unless the store was
// opened WithNoSync, fsynced. The lazy writes (DeliveredLazily, AckLazily) make no commit of
// their own: they ride in the next one.
//
// The store reads the clock only where it stamps a time of its own (enqueued at, received
// at); every decision that depends on time (Due, Expired, PurgeSeen) takes now from the
// caller, so tests need no sleeps. Each commit runs on the goroutine of one of the writers it
// carries, or on the applier's, which Close stops after applying what is left.
//
// A damaged file never makes the store panic: Open checks the file with its own
// bounds-checked reader of bbolt's page format before bbolt reads it and returns a
// *CorruptError; Check lists the damage and Recover copies every readable message into a new
// file (boltfile.go, walk.go, check.go, recover.go). The layout, the guarantees and how each
// is tested are in docs/delivery.md.
package store
