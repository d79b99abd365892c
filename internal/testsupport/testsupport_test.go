package testsupport

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

func TestMain(m *testing.M) { VerifyTestMain(m, MocknetPipes()) }

// fatalTB records a Fatalf and ends the goroutine that called it, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func waitIn(within time.Duration, cond func() bool) string {
	tb := &fatalTB{}
	done := make(chan struct{})
	go func() { defer close(done); WaitFor(tb, within, "the thing", cond) }()
	<-done
	return tb.msg
}

func TestWaitFor_ReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	if msg := waitIn(10*time.Second, func() bool { n++; return n == 3 }); msg != "" {
		t.Fatalf("failed: %s", msg)
	}
	if n != 3 {
		t.Fatalf("cond asked %d times, want 3", n)
	}
}

func TestWaitFor_FailsSayingWhatItWaitedFor(t *testing.T) {
	start := time.Now()
	msg := waitIn(50*time.Millisecond, func() bool { return false })
	if want := "timed out after 50ms waiting for the thing"; msg != want {
		t.Fatalf("message %q, want %q", msg, want)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("gave up after %s", d)
	}
}

func TestMocknet_HostsHoldTheirKeysAndAreConnected(t *testing.T) {
	net := Mocknet(t, 3, FirstPort(9000))
	if len(net.Hosts) != 3 || len(net.Keys) != 3 {
		t.Fatalf("%d hosts, %d keys", len(net.Hosts), len(net.Keys))
	}
	for i, h := range net.Hosts {
		if id, _ := peer.IDFromPrivateKey(net.Keys[i]); id != h.ID() {
			t.Errorf("host %d is %s, its key %s", i, h.ID(), id)
		}
		if got, want := h.Addrs()[0].String(), fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", 9000+i); got != want {
			t.Errorf("host %d listens on %s, want %s", i, got, want)
		}
		for j, o := range net.Hosts {
			if i != j && h.Network().Connectedness(o.ID()) != network.Connected {
				t.Errorf("host %d is not connected to host %d", i, j)
			}
		}
	}
}

func TestMocknet_LinkOnlyLeavesTheHostsUnconnected(t *testing.T) {
	net := Mocknet(t, 2, LinkOnly())
	if c := net.Hosts[0].Network().Connectedness(net.Hosts[1].ID()); c == network.Connected {
		t.Fatal("LinkOnly hosts are connected")
	}
	if len(net.LinksBetweenPeers(net.Hosts[0].ID(), net.Hosts[1].ID())) == 0 {
		t.Fatal("LinkOnly hosts are not linked")
	}
	if _, err := net.ConnectPeers(net.Hosts[0].ID(), net.Hosts[1].ID()); err != nil {
		t.Fatalf("linked hosts cannot connect: %v", err)
	}
}

func TestGauge_CountsWhatIsUnderWayAndTheMostAtOnce(t *testing.T) {
	var g Gauge
	g.Enter()
	g.Enter()
	g.Leave()
	g.Enter()
	g.Leave()
	if now, most := g.Counts(); now != 1 || most != 2 {
		t.Fatalf("Counts() = %d, %d; want 1 under way, at most 2", now, most)
	}
}
