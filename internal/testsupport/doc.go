// Package testsupport is what the module's tests share, in the manner of raft's rafttest: one
// polling wait (WaitFor), one goroutine-leak check for TestMain (VerifyTestMain with the
// goroutines a package may leave: MocknetPipes, ProcessWorkers), and a mocknet of linked,
// connected libp2p hosts with Ed25519 keys (Mocknet) on which each package builds its own
// part: gossip nodes, discovery nodes, whole nodes; and a Gauge, for tests that count what
// runs at once.
//
// It sits on floor 0 (docs/architecture.md): it imports third-party code only, never a
// package of this module, so that every package's tests may import it.
package testsupport
