// Package e2e holds end-to-end tests that build the iacp-node binary and run real node
// processes on loopback: crash tests with SIGKILL, restarts, and the local API as an agent
// sees it. It has no code of its own.
package e2e
