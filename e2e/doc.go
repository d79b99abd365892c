// Package e2e holds end-to-end tests that build the iacp-node binary and run real node
// processes on loopback: crash tests with SIGKILL, restarts, and the local API as an agent
// sees it. The first node of a test founds a mesh (iacp-node init) and the others join it
// with an invitation (iacp-node invite, init --join). It has no code of its own.
package e2e
