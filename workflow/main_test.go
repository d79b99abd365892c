package workflow

import (
	"testing"

	"github.com/iacp-node/iacp-node/internal/testsupport"
)

func TestMain(m *testing.M) {
	testsupport.VerifyTestMain(m, testsupport.ProcessWorkers())
}
