// Package coord is the coordination patterns of ACP v2 (specs/002, "Coordination Patterns"
// and "Error Recovery") over one node's own calls: retry with backoff, a circuit breaker per
// target agent, any-of capability ("an agent with capability X", spread by free capacity and
// failing over), fallback over ordered candidates, scatter-gather (all, first-k or quorum,
// under a deadline) and pipelines (each step's response feeding the next step's parameters,
// one correlation id through the chain).
//
// A Coordinator owns the breakers of one node; build one over the *node.Node with New. Every
// pattern is a method that returns when its rule is decided: it starts goroutines only for a
// scatter's fan-out, and waits for all of them before it returns. The Coordinator has no
// background goroutine, so there is nothing to close.
//
// It sits on floor 6 (docs/architecture.md): it reaches the mesh through node alone.
// docs/coordination.md says what each pattern guarantees under failure.
package coord
