package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/mcpserver"
)

func init() { register(newMCPCmd) }

func newMCPCmd() *cobra.Command {
	var cf clientFlags
	var httpAddr string
	cmd := &cobra.Command{
		Use:   "mcp [--http 127.0.0.1:PORT]",
		Short: "Serve the node to MCP clients (LLM applications) over stdio or streamable HTTP",
		Long: `mcp is a Model Context Protocol server for the agent whose node runs with --data-dir: an MCP
client (an LLM application) gets its tools send, request, discover, resolve, agents, broadcast,
cancel, outbox and inbox, and its resources iacp://agents and iacp://inbox (docs/mcp.md). It
talks to the node through its local API. It starts whether or not the node runs (an MCP host
may launch it at login): a call made while no node answers fails with an error that says so,
and the first call after 'iacp-node run' started reaches the node.

By default it speaks MCP over stdin and stdout, as an MCP client that launches it expects; it
writes nothing else there. With --http it serves streamable HTTP on that loopback address
instead, to clients that send the node's API token as a bearer token.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := cf.client(); err != nil && !errors.As(err, new(*apiclient.NoNodeError)) {
				return err // a bad flag; no node running is what each call will say until one runs
			}
			s := mcpserver.New(cf.client, Version)
			if httpAddr == "" {
				err := s.Run(cmd.Context(), &mcp.StdioTransport{})
				if errors.Is(err, context.Canceled) {
					return nil
				}
				return err
			}
			return serveMCP(cmd.Context(), cmd, s, httpAddr, &cf)
		},
	}
	addClientFlags(cmd, &cf)
	cmd.Flags().StringVar(&httpAddr, "http", "", "serve streamable HTTP on this loopback address instead of stdio")
	return cmd
}

// serveMCP serves s over streamable HTTP on addr, a loopback address, until ctx ends.
func serveMCP(ctx context.Context, cmd *cobra.Command, s *mcp.Server, addr string, cf *clientFlags) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--http %q: want host:port: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--http %q: serve MCP on a loopback address (127.0.0.1, ::1); it acts with the node's API token", addr)
	}
	token := cf.token
	if token == "" {
		if token, err = api.ReadToken(cf.dataDir); err != nil {
			return fmt.Errorf("no API token to ask of MCP clients: pass --token or --data-dir of the node (%w)", err)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--http %s: %w; choose another address with --http 127.0.0.1:PORT", addr, err)
	}
	srv := &http.Server{Handler: mcpserver.HTTPHandler(s, token), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(cmd.OutOrStdout(), "mcp       http://%s (bearer: the node's API token)\n", ln.Addr())
	return serveHTTP(ctx, srv, ln)
}
