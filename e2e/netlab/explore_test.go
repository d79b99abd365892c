package netlab

import (
	"strings"
	"testing"
	"time"
)

func TestExplore(t *testing.T) {
	l := newLab(t)
	pub, _ := l.Public("founder", "1.2.0.11")
	h1, _ := l.Home("home1", "1.2.0.101", Cone)
	h2, _ := l.Home("home2", "1.2.0.102", Cone)
	a, _ := h1.Join("alice", "192.168.1.2")
	b, _ := h2.Join("bob", "192.168.1.2")
	f := found(t, pub, "lab:pub:founder", publicArgs...)
	f.start()
	boot := f.addr()
	t.Log("boot", boot)
	alice := join(t, a, f, "lab:home1:alice")
	bob := join(t, b, f, "lab:home2:bob")
	alice.env = []string{"GOLOG_LOG_LEVEL=warn,p2p-holepunch=debug,autorelay=debug"}
	bob.env = alice.env
	t0 := time.Now()
	alice.start()
	bob.start()
	t.Log("started", time.Since(t0))
	for i := 0; i < 40; i++ {
		out, err := bob.cli("resolve", "lab:home1:alice")
		t.Logf("%v resolve: %v %s", time.Since(t0), err, out)
		if err == nil && strings.Contains(string(out), "circuit") {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	for i := 0; i < 20; i++ {
		out, err := bob.cli("send", "--to", "lab:home1:alice", "--intent", "notify", "--payload", `{"event_type":"hi"}`, "--ttl", "5m")
		t.Logf("%v send: %v %s", time.Since(t0), err, out)
		if err == nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for i := 0; i < 10; i++ {
		out, _ := bob.cli("peers")
		t.Logf("%v bob peers:\n%s", time.Since(t0), out)
		out, _ = alice.cli("peers")
		t.Logf("%v alice peers:\n%s", time.Since(t0), out)
		time.Sleep(3 * time.Second)
	}
	out, _ := f.cli("peers")
	t.Logf("founder peers:\n%s", out)
	out, _ = alice.cli("status")
	t.Logf("alice status:\n%s", out)
	t.Log(alice.logs())
	t.Log(bob.logs())
}
