package testsupport

import (
	"testing"

	"go.uber.org/goleak"
)

// Ignore is a set of goroutines VerifyTestMain does not count as leaked.
type Ignore []goleak.Option

// VerifyTestMain runs the package's tests and then fails them if any goroutine outlives
// them, but for those in ignore. With no ignore it is goleak.VerifyTestMain(m).
func VerifyTestMain(m *testing.M, ignore ...Ignore) {
	var opts []goleak.Option
	for _, ig := range ignore {
		opts = append(opts, ig...)
	}
	goleak.VerifyTestMain(m, opts...)
}

// MocknetPipes are the goroutines that mocknet itself can leave blocked. mocknet's streams
// are io.Pipes that observe no deadline and no context: a stream opened while a mesh is being
// torn down (a gossipsub hello, a DHT request) can leave its writer, its reader (a library's
// handler, whose read deadline mocknet ignores) and mocknet's transport goroutine blocked on
// the pipe after every Close. On real transports the stream is reset and they return. Only
// these frames are ignored; goroutines of ours still count as leaks.
func MocknetPipes() Ignore {
	return Ignore{
		goleak.IgnoreTopFunction("github.com/libp2p/go-libp2p/p2p/net/mock.(*stream).transport"),
		goleak.IgnoreTopFunction("github.com/libp2p/go-libp2p/p2p/net/mock.(*stream).Write"),
		goleak.IgnoreTopFunction("io.(*pipe).write"),
		goleak.IgnoreTopFunction("io.(*pipe).read"),
	}
}

// ProcessWorkers are go-log's and opencensus' process-wide workers, started by importing
// them (through a whole node's dependencies), not by anything a test starts.
func ProcessWorkers() Ignore {
	return Ignore{
		goleak.IgnoreTopFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
	}
}
