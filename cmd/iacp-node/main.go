// Command iacp-node is the IACP mesh node: run one beside every agent. See `iacp-node --help`.
package main

import (
	"os"

	"github.com/iacp-node/iacp-node/cmd/iacp-node/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
