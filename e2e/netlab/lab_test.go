package netlab

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
)

// listen starts the helper's one-shot TCP server on h and waits until it listens.
func listen(t *testing.T, h *Host, addr string) *Proc {
	t.Helper()
	p, err := h.Start("env", "NETLAB_HELPER=listen:"+addr, os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 5*time.Second, "the helper to listen on "+h.Name, func() bool {
		return strings.Contains(p.Output(), "listening")
	})
	return p
}

func dial(h *Host, addr string) (string, error) {
	out, err := h.Run("env", "NETLAB_HELPER=dial:"+addr, os.Args[0])
	return strings.TrimSpace(string(out)), err
}

// A host behind a home router reaches a public host, which sees the router's public address;
// nothing reaches into the home unasked; a cut home reaches nothing until it heals; and Close
// leaves no namespace behind.
func TestLab_HomeIsBehindItsRoutersNAT(t *testing.T) {
	l := newLab(t)
	pub, err := l.Public("pub", "1.2.0.11")
	if err != nil {
		t.Fatal(err)
	}
	home, err := l.Home("home", "1.2.0.101", Cone)
	if err != nil {
		t.Fatal(err)
	}
	laptop, err := home.Join("laptop", "192.168.1.2")
	if err != nil {
		t.Fatal(err)
	}
	listen(t, pub, "1.2.0.11:7000")
	if got, err := dial(laptop, "1.2.0.11:7000"); err != nil || got != "1.2.0.101" {
		t.Fatalf("the public host saw the laptop at %q (%v), want the router's 1.2.0.101", got, err)
	}
	listen(t, laptop, "0.0.0.0:7001")
	if got, err := dial(pub, "1.2.0.101:7001"); err == nil {
		t.Fatalf("a public host reached into the home unasked: %q", got)
	}
	if err := home.Cut(); err != nil {
		t.Fatal(err)
	}
	listen(t, pub, "1.2.0.11:7002")
	if got, err := dial(laptop, "1.2.0.11:7002"); err == nil {
		t.Fatalf("a cut home reached the internet: %q", got)
	}
	if err := home.Heal(); err != nil {
		t.Fatal(err)
	}
	if got, err := dial(laptop, "1.2.0.11:7002"); err != nil || got != "1.2.0.101" {
		t.Fatalf("after healing the laptop got %q (%v)", got, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(out), l.Prefix()) {
		t.Fatalf("namespaces left after Close:\n%s", out)
	}
}

// No host of the lab has a route beyond the lab's own subnets.
func TestLab_NoRouteLeavesTheLab(t *testing.T) {
	l := newLab(t)
	pub, err := l.Public("pub", "1.2.0.11")
	if err != nil {
		t.Fatal(err)
	}
	home, err := l.Home("home", "1.2.0.101", Symmetric)
	if err != nil {
		t.Fatal(err)
	}
	laptop, err := home.Join("laptop", "192.168.1.2")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []*Host{pub, home.Host, laptop} {
		out, err := h.Run("ip", "route", "get", "9.9.9.9")
		if err == nil && !strings.Contains(string(out), "unreachable") {
			// a home host's default route ends at its router, which has none
			if h != laptop {
				t.Errorf("%s routes 9.9.9.9: %s", h.Name, out)
			}
		}
	}
	if out, err := home.Run("ip", "route", "get", "9.9.9.9"); err == nil {
		t.Errorf("the router routes outside the lab: %s", out)
	}
}
