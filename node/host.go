package node

import (
	"fmt"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"

	"github.com/iacp-node/iacp-node/discovery"
)

// Resource limits of /iacp/1.0.0 on top of go-libp2p's scaled defaults: enough streams for a
// busy agent, few enough per peer that one peer cannot take them all.
var (
	iacpProtocolLimit = rcmgr.BaseLimit{Streams: 4096, StreamsInbound: 2048, StreamsOutbound: 2048, Memory: 256 << 20}
	iacpPeerLimit     = rcmgr.BaseLimit{Streams: 128, StreamsInbound: 64, StreamsOutbound: 64, Memory: 64 << 20}
)

// newHost builds the libp2p host: TCP and QUIC, Noise and TLS, yamux, a resource manager with
// explicit limits, a connection manager, and NAT traversal when configured (natOptions; its
// hole punches are counted in paths).
//
// go-libp2p's own Prometheus metrics are off (libp2p.DisableMetrics, and the resource
// manager's stats reporter): they register with Prometheus's global registry, which the
// node's /metrics does not serve (each API server has its own), and the resource manager's
// reporter formats a timestamp and allocates an event for every stream and memory
// reservation, about 1.6 KB of garbage per request/response.
func newHost(c *Config, key crypto.PrivKey, paths *pathBook) (host.Host, error) {
	limits := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&limits)
	limits.AddProtocolLimit(ProtocolID, iacpProtocolLimit, rcmgr.BaseLimitIncrease{})
	limits.AddProtocolPeerLimit(ProtocolID, iacpPeerLimit, rcmgr.BaseLimitIncrease{})
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(limits.Scale(c.ResourceMemory, c.ResourceFDs)),
		rcmgr.WithMetricsDisabled())
	if err != nil {
		return nil, fmt.Errorf("resource manager: %w", err)
	}
	cm, err := connmgr.NewConnManager(c.ConnLow, c.ConnHigh, connmgr.WithGracePeriod(c.ConnGrace))
	if err != nil {
		rm.Close()
		return nil, fmt.Errorf("connection manager: %w", err)
	}
	opts := []libp2p.Option{
		libp2p.Identity(key),
		libp2p.ListenAddrStrings(c.ListenAddrs...),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(quic.NewTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Security(libp2ptls.ID, libp2ptls.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.ResourceManager(rm),
		libp2p.ConnectionManager(cm),
		libp2p.UserAgent("iacp-node"),
		libp2p.DisableMetrics(),
	}
	src := &relaySource{}
	if c.NAT {
		var boot []peer.AddrInfo
		for _, s := range c.Bootstrap {
			if ai, err := ParseBootstrap(s); err == nil { // newNode refuses a bad one
				boot = append(boot, ai)
			}
		}
		self, _ := peer.IDFromPrivateKey(key)
		opts = append(opts, natOptions(c, discovery.MergePeers(boot, self), src, paths)...)
	} else {
		opts = append(opts, libp2p.DisableRelay())
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		cm.Close()
		rm.Close()
		return nil, fmt.Errorf("libp2p host (listen %v): %w", c.ListenAddrs, err)
	}
	src.h.Store(&h)
	if c.NAT && c.Reachability == ReachAuto {
		announceUnknown(h)
	}
	return h, nil
}
