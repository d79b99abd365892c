package pubsub

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// mocknet's in-memory streams are io.Pipes that observe no deadline and no context. When
		// a test crashes a node while a neighbour's gossipsub is writing its hello to it
		// (handleNewPeer), the writer and mocknet's stream plumbing can stay blocked on the pipe
		// after every Close: a property of mocknet, not of this package (on yamux the stream is
		// reset and the write returns). Only these frames are ignored.
		goleak.IgnoreTopFunction("github.com/libp2p/go-libp2p/p2p/net/mock.(*stream).transport"),
		goleak.IgnoreTopFunction("github.com/libp2p/go-libp2p/p2p/net/mock.(*stream).Write"),
		goleak.IgnoreTopFunction("io.(*pipe).write"),
		goleak.IgnoreTopFunction("io.(*pipe).read"),
	)
}
