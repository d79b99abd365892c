// Command barehost is the floor under the idle node's memory (docs/journal/node.md "The idle
// node"): a go-libp2p host on go-libp2p's own defaults, listening on loopback TCP and QUIC as
// `iacp-node run` does under bench/idle.sh, with nothing of the node on top (no DHT,
// gossipsub, store, local API). It prints "ready" and its addresses, then waits for SIGINT
// or SIGTERM. Measure it with `make idle-floor`.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/libp2p/go-libp2p"
)

func main() {
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "barehost:", err)
		os.Exit(1)
	}
	fmt.Println("ready", h.ID(), h.Addrs())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	if err := h.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "barehost:", err)
		os.Exit(1)
	}
}
