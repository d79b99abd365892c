// Package mocknet is go-libp2p's mocknet (p2p/net/mock, v0.51.0, MIT, see LICENSE), copied for
// the simulator with one change: its streams run no goroutine (and keep their deadlines).
//
//   - a Mocknet has many network.Networks
//   - a Mocknet has many Links
//   - a Link joins two network.Networks
//   - network.Conns and network.Streams are created by network.Networks
//
// go-libp2p's stream hands every write to a goroutine of its own, which waits for the link's
// latency and writes into an io.Pipe; a simulated mesh of N nodes carries tens of streams per
// node, so that goroutine was the largest share of the simulator's goroutines (44 % at 60
// nodes) and each write cost two hand-offs. Here (mock_stream.go) a write is appended to the
// other end's buffer with the time it arrives, and the reader takes it when that time has come
// (docs/sim.md, "Transport"); a read waiting for data and a write waiting for room fail at
// their deadlines, which go-libp2p's mocknet ignores. Everything else is go-libp2p's code,
// unchanged but for this comment, Connectedness, which takes the network's read lock
// rather than its exclusive one, SetSchedule, through which the simulator's CPU cost model
// delays a write's bytes by what sending and receiving them costs (docs/sim.md), and
// SetLinker, UnlinkPeer and UnlinkAll, with which the simulator links the pairs of nodes that
// dial each other rather than every pair (a million links at 1000 nodes); a link made by a dial
// goes with its last connection, a peer's table of connections keeps no empty map of a peer it
// no longer has a connection to (and no longer indexes them by link, which nothing read), and
// a lookup of the links between two peers no longer makes the maps it looks into. The tests
// of go-libp2p's package stay there.
package mocknet
