package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/node"
)

func init() {
	// init creates the local API's bearer token beside the key.
	initHookFuncs = append(initHookFuncs, func(dataDir string) error {
		_, err := api.LoadOrCreateToken(dataDir)
		return err
	})
}

// serveUntilDone prints the node's listen addresses, starts the local services and runs
// until ctx ends (Ctrl-C); then it stops the services and closes the node with closeNode,
// which also runs when the services cannot start.
func serveUntilDone(ctx context.Context, n *node.Node, cfg node.Config, f *runFlags, out io.Writer, closeNode func() error) error {
	for _, a := range n.Addrs() {
		fmt.Fprintf(out, "listen    %s\n", a)
	}
	stopServices, err := startServices(ctx, n, cfg, f, out)
	if err != nil {
		closeNode()
		return err
	}
	<-ctx.Done()
	fmt.Fprintln(out, "stopping: finishing in-flight exchanges")
	err = stopServices()
	if cerr := closeNode(); err == nil {
		err = cerr
	}
	return err
}

// startServices starts the local agent API beside the node. It returns a function that stops
// it.
func startServices(_ context.Context, n *node.Node, cfg node.Config, f *runFlags, out io.Writer) (func() error, error) {
	opts := []api.Option{api.WithListen(f.apiAddr), api.WithAllowRemote(f.apiAllowRemote), api.WithDataDir(cfg.DataDir),
		api.WithLogger(n.Logger().With("subsystem", "api"))}
	if f.webhook != "" {
		opts = append(opts, api.WithWebhook(f.webhook, f.webhookToken))
	}
	srv, err := api.New(n, opts...)
	if err != nil {
		return nil, fmt.Errorf("local API on %s: %w", f.apiAddr, err)
	}
	fmt.Fprintf(out, "api       http://%s (token in %s/api.token)\n", srv.Addr(), cfg.DataDir)
	if !srv.Loopback() {
		fmt.Fprintf(out, "WARNING   the local API listens off loopback: its bearer token and every message travel in clear; put a TLS-terminating proxy in front of it, or keep it on 127.0.0.1\n")
	}
	return srv.Close, nil
}

// serveHTTP serves srv on ln until ctx ends (Ctrl-C), then shuts it down, giving requests in
// flight 5 s to finish; an error of the server itself ends it sooner.
func serveHTTP(ctx context.Context, srv *http.Server, ln net.Listener) error {
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shut)
	<-done
	return err
}
