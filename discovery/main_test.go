package discovery

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/iacp-node/iacp-node/internal/testleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testleak.Mocknet()...)
}
