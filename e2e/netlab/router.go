package netlab

import (
	"fmt"
	"os/exec"
	"strings"
)

// NAT is how a home router maps its hosts' connections onto its one public address.
type NAT int

const (
	// Cone is Linux's masquerade as a home router does it: a host's source port is kept when
	// it is free, so one local port maps to one public port whoever the remote is
	// (endpoint-independent mapping), and only replies to what went out come back in.
	// Hole punching can work through it.
	Cone NAT = iota
	// Symmetric gives every new connection a random public port (masquerade fully-random):
	// the port a peer observed is not the port the next peer will see, so hole punching
	// cannot guess it.
	Symmetric
)

func (n NAT) String() string {
	if n == Symmetric {
		return "symmetric"
	}
	return "cone"
}

// LAN is the subnet of every home network: all homes use the same one, as real home
// routers do, so a private address says nothing about which home it is in.
const LAN = "192.168.1.0/24"

const gateway = "192.168.1.1"

// Router is a home network: a router namespace with its WAN side on the internet and a LAN
// bridge for the home's hosts, NATing them behind its public address.
type Router struct {
	*Host
	WAN string // its public address
	NAT NAT
}

// Home adds a home network behind a router with public address wan and the given NAT.
func (l *Lab) Home(name, wan string, nat NAT) (*Router, error) {
	h, err := l.namespace(name)
	if err != nil {
		return nil, err
	}
	r := &Router{Host: h, WAN: wan, NAT: nat}
	if err := link(h, "wan", l.net(), name, "br0"); err != nil {
		return nil, err
	}
	steps := [][]string{
		{"addr", "add", wan + "/24", "dev", "wan"},
		{"link", "add", "lan", "type", "bridge"},
		{"link", "set", "dev", "lan", "up"},
		{"addr", "add", gateway + "/24", "dev", "lan"},
	}
	for _, s := range steps {
		if err := h.ip(s...); err != nil {
			return nil, err
		}
	}
	if out, err := h.Run("sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
		return nil, fmt.Errorf("%s: ip_forward: %v: %s", h.Name, err, out)
	}
	return r, r.nft(rules(nat))
}

// rules is the router's ruleset: masquerade out of wan; forward only what the LAN started
// (and its replies); drop, without an answer, whatever comes in unasked for the router itself
// (as home routers do: a refusal would end a hole punch's first packet before the peer's own
// got out); and an empty "cut" chain that Cut fills to drop everything.
func rules(nat NAT) string {
	flags := ""
	if nat == Symmetric {
		flags = " fully-random"
	}
	return `table ip lab {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		oifname "wan" masquerade` + flags + `
	}
	chain input {
		type filter hook input priority filter; policy drop;
		ct state established,related accept
		iifname { "lo", "lan" } accept
	}
	chain forward {
		type filter hook forward priority filter; policy drop;
		ct state established,related accept
		iifname "lan" oifname "wan" accept
	}
	chain cut {
		type filter hook forward priority -10; policy accept;
	}
}
`
}

func (r *Router) nft(script string) error {
	cmd := exec.Command("ip", "netns", "exec", r.Name, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: nft: %v: %s", r.Name, err, out)
	}
	return nil
}

// Join adds a host to the home network at addr (in LAN), with the router as its gateway.
func (r *Router) Join(name, addr string) (*Host, error) {
	h, err := r.lab.namespace(name)
	if err != nil {
		return nil, err
	}
	return h, r.attach(h, addr)
}

// attach links h's eth0 to the LAN bridge at addr, with the router as default route.
func (r *Router) attach(h *Host, addr string) error {
	port := "p-" + strings.TrimPrefix(h.Name, r.lab.prefix+"-")
	if len(port) > 15 {
		port = port[:15]
	}
	if err := link(h, "eth0", r.Host, port, "lan"); err != nil {
		return err
	}
	h.Addr = addr
	if err := h.ip("addr", "add", addr+"/24", "dev", "eth0"); err != nil {
		return err
	}
	return h.ip("route", "add", "default", "via", gateway)
}

// Move takes h out of its home network (its link goes, and every connection through it) and
// into r's at addr: a laptop that moves between networks.
func (r *Router) Move(h *Host, addr string) error {
	if err := h.ip("link", "del", "dev", "eth0"); err != nil {
		return err
	}
	return r.attach(h, addr)
}

// Cut drops everything the router forwards, both ways: the home is off the internet (its
// hosts still reach each other). Heal undoes it.
func (r *Router) Cut() error { return r.nft("add rule ip lab cut drop\n") }

// Heal ends a Cut.
func (r *Router) Heal() error { return r.nft("flush chain ip lab cut\n") }
