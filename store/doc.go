// Package store is the node's durable delivery state: the outbox of direct messages waiting
// for a receipt, the inbox of accepted messages waiting for the local agent, the persistent
// "seen" set that makes acceptance exactly-once across restarts, and a journal of the gossip
// message ids delivered to the agent.
//
// Everything lives in one bbolt file (<data-dir>/store/store.db by the node's convention).
// Put, Accept, Ack, Delivered, Reschedule, RetryNow and RememberGossip go through the
// store's group commit (commit.go): a write with no commit in flight commits at once, and the
// writes that arrive during a commit share the next one and its fsync. A call that returns
// nil has been committed and, unless the store was opened WithNoSync, fsynced. The lazy
// writes (DeliveredLazily, AckLazily) make no commit of their own: they ride in the next one.
//
// The store reads the clock only where it stamps a time of its own (enqueued at, received
// at); every decision that depends on time (Due, Expired, PurgeSeen) takes now from the
// caller, so tests need no sleeps. It starts no goroutine of its own: each commit runs on
// the goroutine of one of the writers it carries.
//
// A damaged file never makes the store panic: Open checks the file with its own
// bounds-checked reader of bbolt's page format before bbolt reads it and returns a
// *CorruptError; Check lists the damage and Recover copies every readable message into a new
// file (boltfile.go, walk.go, check.go, recover.go). The layout, the guarantees and how each
// is tested are in docs/delivery.md.
package store
