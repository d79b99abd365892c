package api

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/iacp-node/iacp-node/internal/testleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(testleak.Mocknet(),
		// go-log's and opencensus' process-wide workers, started by imports, not by servers.
		goleak.IgnoreTopFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
	)...)
}
