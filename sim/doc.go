// Package sim runs many real IACP nodes in one process and measures them.
//
// A Scenario (a YAML script, see docs/sim.md) says how many nodes to start, on which network
// (go-libp2p's in-memory mocknet with link latency, jitter and bandwidth, or real loopback
// sockets), in which trust mode (authority by default: node 0 holds the mesh authority and
// every other node joins by invitation, as iacp-node init --join does; or open), what
// synthetic agents they serve, and a list of steps: join, converge, discover, load,
// broadcast, group, kill, restart, partition, heal, churn, offline and intruder. Each step is
// measured (convergence time, lookup success and latency, request round trips, broadcast
// propagation, failure detection, offline delivery, what an intruder without a valid
// certificate gets acted on, memory and CPU) and checked against the step's expectations. Run returns a Report that prints as a table, JSON or a self-contained
// HTML page.
//
// The nodes are the real node package (node.New with discovery and gossip), not a model. Each
// starts from NodeProfile, node.DefaultConfig adjusted for many nodes in one process, with the
// scenario's node section (NodeSpec, in node.Config's names) applied over it. All
// randomness of the script (which nodes act, targets, schedules, handler delays, jitter) comes
// from one source seeded by Scenario.Seed; the interleaving of goroutines and libp2p's own
// randomness are not under its control, so two runs with one seed do the same things but not
// at exactly the same instants.
package sim
