// Package workflow runs durable workflows (IaCP 1.0 section 4.5.1, `workflow_start`): steps
// sent as requests to agents, with dependencies that form a DAG, a timeout, attempts and
// fallback agents per step, each step fed the results of the steps it depends on.
//
// The node that starts a workflow coordinates it, and keeps its state in the node's store
// (node.PutRecord) at every change: a coordinator killed mid-run resumes where it stopped
// when an Engine is built over its restarted node. A step's request is kept before it is sent
// and sent again with the same message id after a restart, or after a timeout; the agent's
// node accepts a message id once and answers the same request again with the answer its agent
// gave the first time, so no step that had reported a result runs twice (docs/coordination.md,
// "Workflows").
//
// It sits on floor 6 (docs/architecture.md): it reaches the mesh through node alone.
package workflow
