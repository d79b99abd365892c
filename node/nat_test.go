package node

import (
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	ma "github.com/multiformats/go-multiaddr"
)

func addrs(ss ...string) []ma.Multiaddr {
	out := make([]ma.Multiaddr, len(ss))
	for i, s := range ss {
		out[i] = ma.StringCast(s)
	}
	return out
}

const relayAddr = "/ip4/1.2.0.11/tcp/4001/p2p/12D3KooWKJRo2BNjVRSLHZNCchVLGrYcDGaPUGUPaE2oCs1baMhi/p2p-circuit"

// A node advertises no loopback or private address once it has a public or a relay address;
// a node with neither (a LAN or loopback mesh) advertises what it has.
func TestAdvertised_NoPrivateAddressesOnceReachableFromOutside(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in, want []string
	}{
		{"lan", []string{"/ip4/127.0.0.1/tcp/1", "/ip4/192.168.1.2/tcp/1"}, []string{"/ip4/127.0.0.1/tcp/1", "/ip4/192.168.1.2/tcp/1"}},
		{"behind a NAT, with a relay", []string{"/ip4/127.0.0.1/tcp/1", "/ip4/192.168.1.2/tcp/1", relayAddr}, []string{relayAddr}},
		{"public with a private side", []string{"/ip4/10.0.0.5/udp/1/quic-v1", "/ip4/1.2.0.11/udp/1/quic-v1"}, []string{"/ip4/1.2.0.11/udp/1/quic-v1"}},
	} {
		got := advertised(addrs(tc.in...))
		if len(got) != len(tc.want) {
			t.Errorf("%s: advertised %v, want %v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i].String() != tc.want[i] {
				t.Errorf("%s: advertised %v, want %v", tc.name, got, tc.want)
			}
		}
	}
}

// TCP to a peer that also has a QUIC address waits quicTCPDelay longer than go-libp2p's
// ranking; TCP alone is dialled as go-libp2p ranks it.
func TestQuicFirst_TCPWaitsForQUIC(t *testing.T) {
	delays := func(as []ma.Multiaddr) map[string]time.Duration {
		out := map[string]time.Duration{}
		for _, r := range quicFirst(as) {
			out[r.Addr.String()] = r.Delay
		}
		return out
	}
	both := delays(addrs("/ip4/1.2.0.11/tcp/4001", "/ip4/1.2.0.11/udp/4001/quic-v1"))
	if both["/ip4/1.2.0.11/tcp/4001"] < both["/ip4/1.2.0.11/udp/4001/quic-v1"]+quicTCPDelay {
		t.Errorf("TCP after %v, QUIC after %v: TCP should wait %v more", both["/ip4/1.2.0.11/tcp/4001"], both["/ip4/1.2.0.11/udp/4001/quic-v1"], quicTCPDelay)
	}
	if tcp := delays(addrs("/ip4/1.2.0.11/tcp/4001")); tcp["/ip4/1.2.0.11/tcp/4001"] != 0 {
		t.Errorf("TCP alone waits %v", tcp["/ip4/1.2.0.11/tcp/4001"])
	}
}

// fakeConn is the part of a connection the path book reads.
type fakeConn struct {
	network.Conn
	local, remote ma.Multiaddr
	peer          peer.ID
	stat          network.ConnStats
}

func (c fakeConn) LocalMultiaddr() ma.Multiaddr  { return c.local }
func (c fakeConn) RemoteMultiaddr() ma.Multiaddr { return c.remote }
func (c fakeConn) RemotePeer() peer.ID           { return c.peer }
func (c fakeConn) Stat() network.ConnStats       { return c.stat }

// A connection hole punching opened is "hole-punched" while it lives; another direct one is
// "direct", a relayed one "relayed"; failed punches are counted.
func TestPathBook_SaysWhichConnectionsHolePunchingOpened(t *testing.T) {
	b := newPathBook()
	p := peer.ID("bob")
	punched := fakeConn{local: ma.StringCast("/ip4/192.168.1.2/udp/5/quic-v1"), remote: ma.StringCast("/ip4/1.2.0.102/udp/6/quic-v1"), peer: p}
	relayed := fakeConn{local: ma.StringCast("/ip4/192.168.1.2/tcp/5"), remote: ma.StringCast(relayAddr), peer: p}
	other := fakeConn{local: ma.StringCast("/ip4/192.168.1.2/tcp/5"), remote: ma.StringCast("/ip4/1.2.0.102/tcp/7"), peer: p}
	if got := b.path(p, []network.Conn{relayed}); got != PathRelayed {
		t.Errorf("relayed only: %q", got)
	}
	b.HolePunchFinished("initiator", 1, nil, nil, nil)
	b.HolePunchFinished("receiver", 1, nil, nil, punched)
	if got := b.path(p, []network.Conn{relayed, punched}); got != PathHolePunched {
		t.Errorf("after the punch: %q", got)
	}
	if got := b.path(p, []network.Conn{other}); got != PathDirect {
		t.Errorf("a direct connection nobody punched: %q", got)
	}
	if got := b.path(p, []network.Conn{punched}); got != PathDirect {
		t.Errorf("the punched connection was forgotten once closed, so its addresses again are %q, want direct", got)
	}
	if ok, failed := b.counts(); ok != 1 || failed != 1 {
		t.Errorf("counted %d succeeded and %d failed, want 1 and 1", ok, failed)
	}
}

// A peer reached over relays only is asked for another punch repunchTries times, backing off.
func TestPathBook_RepunchesAFewTimesBackingOff(t *testing.T) {
	b := newPathBook()
	p, now := peer.ID("bob"), time.Now()
	var at []time.Duration
	for d := time.Duration(0); d < 5*time.Minute; d += time.Second {
		if b.tryAgain(p, now.Add(d)) {
			at = append(at, d)
		}
	}
	if len(at) != repunchTries || at[1]-at[0] != repunchBackoff || at[2]-at[1] != 2*repunchBackoff {
		t.Errorf("repunched at %v, want %d times, backing off from %v", at, repunchTries, repunchBackoff)
	}
	b.settled(p)
	if !b.tryAgain(p, now.Add(10*time.Minute)) {
		t.Error("a peer that settled (a direct connection, or none) is not asked again when it is relayed again")
	}
}

// fakeStream is a stream on a connection with the given stats.
type fakeStream struct {
	network.Stream
	conn fakeConn
}

func (s fakeStream) Conn() network.Conn { return s.conn }

// A frame crosses a relayed connection only if it fits in the relay's announced data limit,
// less the headroom for the connection's other traffic; a direct connection takes any.
func TestFitsRelay_WithinTheRelaysLimit(t *testing.T) {
	limited := fakeStream{conn: fakeConn{stat: network.ConnStats{Stats: network.Stats{Limited: true,
		Extra: map[any]any{client.StatLimitData: uint64(128 << 10)}}}}}
	if err := fitsRelay(limited, 100<<10); err != nil {
		t.Errorf("100 KiB over a 128 KiB relay: %v", err)
	}
	err := fitsRelay(limited, 120<<10)
	if err == nil || !strings.Contains(err.Error(), "RELAY_LIMIT") {
		t.Errorf("120 KiB over a 128 KiB relay (16 KiB headroom): %v", err)
	}
	if err := fitsRelay(fakeStream{conn: fakeConn{}}, 16<<20); err != nil {
		t.Errorf("a direct connection refused a 16 MiB frame: %v", err)
	}
}

// The NAT keys are checked and name themselves.
func TestValidateNAT_RefusesWhatCannotWork(t *testing.T) {
	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Reachability = "maybe" }, "reachability"},
		{func(c *Config) { c.NAT, c.Relay = false, true }, "need nat"},
		{func(c *Config) { c.NAT, c.Reachability = false, ReachPublic }, "need nat"},
		{func(c *Config) { c.RelayLimitBytes = 1024 }, "relay_limit_bytes"},
		{func(c *Config) { c.RelayLimitDuration = time.Second }, "relay_limit_duration"},
	} {
		c := DefaultConfig()
		tc.change(&c)
		if err := c.validateNAT(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error naming %q, got %v", tc.want, err)
		}
	}
	c := DefaultConfig()
	if err := c.validateNAT(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}
