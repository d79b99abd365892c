package e2e

import (
	"bufio"
	"context"
	bin "encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// attacker is a libp2p host in the test process, on 127.0.0.1, that speaks /iacp/1.0.0 and
// gossipsub by hand to send what a well-behaved node never would. It has no resource limits
// of its own: the node under attack must hold its own.
type attacker struct {
	t   testing.TB
	h   host.Host
	key crypto.PrivKey
	b   *protocol.Builder
}

const iacpProtocol = "/iacp/1.0.0"

func newAttacker(t testing.TB, agentID string) *attacker {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := libp2p.New(libp2p.Identity(key), libp2p.NoListenAddrs,
		libp2p.ResourceManager(&network.NullResourceManager{}), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	b, err := protocol.NewBuilder(agentID, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &attacker{t: t, h: h, key: key, b: b}
}

// join makes the attacker a certified agent of founder's mesh, a hostile insider: it redeems
// an invitation for its agent id with its own key (node.Join, as init --join does) and serves
// the certificate on /iacp/cert/1.0.0 as a node does, so that the mesh takes its messages as
// its agent's. A test that must show what a certified peer can still do uses it; a peer
// without a certificate gets nothing it sends acted on (docs/trust.md).
func (a *attacker) join(founder *proc) {
	a.t.Helper()
	inv, err := authority.DecodeInvite(founder.invite(a.b.AgentID()))
	if err != nil {
		a.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cert, err := node.Join(ctx, a.h, inv, a.b.AgentID(), nil)
	if err != nil {
		a.t.Fatalf("the attacker's join: %v", err)
	}
	// The certificate protocol (node/certs.go): a request {"peer": "<id>"} (empty: the
	// answering node's own), an answer {"cert": "<compact JWS>"}, or {} for a peer whose
	// certificate it holds no copy of.
	own, _ := json.Marshal(map[string]string{"cert": cert.Raw})
	a.h.SetStreamHandler(node.CertProtocolID, func(s network.Stream) {
		defer s.Close()
		_ = s.SetDeadline(time.Now().Add(10 * time.Second))
		body, err := protocol.ReadFrame(s, 4<<10)
		var req struct {
			Peer string `json:"peer"`
		}
		if err != nil || json.Unmarshal(body, &req) != nil {
			s.Reset()
			return
		}
		answer := own
		if req.Peer != "" && req.Peer != a.h.ID().String() {
			answer = []byte("{}")
		}
		if protocol.WriteFrame(s, answer) != nil {
			s.Reset()
		}
	})
}

// connect dials p and returns its peer id.
func (a *attacker) connect(p *proc) peer.ID {
	a.t.Helper()
	ai, err := peer.AddrInfoFromP2pAddr(ma.StringCast(p.peerAddr()))
	if err != nil {
		a.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.h.Connect(ctx, *ai); err != nil {
		a.t.Fatal(err)
	}
	return ai.ID
}

// stream opens an /iacp/1.0.0 stream to target.
func (a *attacker) stream(target peer.ID) (network.Stream, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return a.h.NewStream(ctx, target, iacpProtocol)
}

// event builds an event from the attacker's agent to `to` with a pad of n bytes, signed.
func (a *attacker) event(to string, n int) *protocol.Message {
	a.t.Helper()
	m, err := a.b.Event(to, protocol.IntentNotify, protocol.EventPayload{EventType: "attack", Detail: strings.Repeat("a", n)})
	if err != nil {
		a.t.Fatal(err)
	}
	return m
}

// badSignature returns m's encoding with one byte of its pad changed after signing: a
// well-formed document whose signature does not verify.
func badSignature(t testing.TB, m *protocol.Message) []byte {
	t.Helper()
	raw, err := protocol.EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndex(string(raw), "aaaa")
	if i < 0 {
		t.Fatal("no pad to tamper with")
	}
	raw[i] = 'b'
	return raw
}

// drain reads and discards what the node answers on s until it ends the stream.
func drain(s network.Stream) {
	br := bufio.NewReader(s)
	for {
		_ = s.SetReadDeadline(time.Now().Add(30 * time.Second))
		var hdr [4]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, br, int64(bin.BigEndian.Uint32(hdr[:]))); err != nil {
			return
		}
	}
}

// memory reads the resident set size and its peak (VmRSS, VmHWM) of a process, in bytes.
func memory(t testing.TB, pid int) (rss, peak int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("memory of process %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return rss, peak
}

// resetPeak makes VmHWM start again from the current RSS (writing 5 to clear_refs).
func resetPeak(t testing.TB, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0o200); err != nil {
		t.Skipf("cannot reset the peak RSS of process %d (%v): this test needs Linux", pid, err)
	}
}

// dirSize sums the sizes of the regular files under dir.
func dirSize(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

const mib = 1 << 20

// pid is the running process's id.
func (p *proc) pid() int { return p.cmd.Process.Pid }
