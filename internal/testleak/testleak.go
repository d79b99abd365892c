// Package testleak holds the goleak options shared by the tests that run many nodes on
// go-libp2p's mocknet.
package testleak

import "go.uber.org/goleak"

// Mocknet returns the goleak options for goroutines that mocknet itself can leave blocked.
// mocknet's streams are io.Pipes that observe no deadline and no context: a stream opened while
// a mesh is being torn down (a gossipsub hello, a DHT request) can leave its writer, its reader
// (a library's handler, whose read deadline mocknet ignores) and mocknet's transport goroutine
// blocked on the pipe after every Close. On real transports the stream is reset and they
// return. Only these frames are ignored; goroutines of ours still count as leaks.
func Mocknet() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/libp2p/go-libp2p/p2p/net/mock.(*stream).transport"),
		goleak.IgnoreTopFunction("github.com/libp2p/go-libp2p/p2p/net/mock.(*stream).Write"),
		goleak.IgnoreTopFunction("io.(*pipe).write"),
		goleak.IgnoreTopFunction("io.(*pipe).read"),
	}
}
