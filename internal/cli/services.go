package cli

import (
	"context"
	"io"

	"github.com/iacp-node/iacp-node/node"
)

// startServices starts what runs beside the node (the local API). It returns a function that
// stops them.
func startServices(_ context.Context, _ *node.Node, _ node.Config, _ string, _ io.Writer) (func() error, error) {
	return func() error { return nil }, nil
}
