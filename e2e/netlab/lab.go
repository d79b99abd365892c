package netlab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Internet is the lab's public segment: every public host and every router's WAN side is on
// it. go-libp2p counts these addresses as public; no route leads out of the lab.
const Internet = "1.2.0.0/24"

var errClosed = errors.New("netlab: the lab is closed")

// cmdTimeout bounds every command the lab runs in a host: ip and nft, and a node's commands
// (a send waits for its first attempt, up to the node's frame_timeout).
const cmdTimeout = 30 * time.Second

// Lab is one network of namespaces. Its methods are safe for concurrent use; Close undoes
// everything and may be called more than once.
type Lab struct {
	prefix string

	mu     sync.Mutex
	nss    []string // namespaces made, in order
	procs  []*Proc  // processes started in them
	closed bool
}

// Available reports why a lab cannot be built on this machine, or nil: it needs root, `ip`
// with network namespaces, and `nft`.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("not root: network namespaces need root")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed (apt-get install -y iproute2 nftables)", tool)
		}
	}
	probe := fmt.Sprintf("nl-%d-probe", os.Getpid())
	if out, err := run("ip", "netns", "add", probe); err != nil {
		return fmt.Errorf("ip netns add fails here: %v: %s", err, out)
	}
	defer run("ip", "netns", "del", probe)
	if out, err := run("ip", "netns", "exec", probe, "nft", "list", "tables"); err != nil {
		return fmt.Errorf("nft does not work in a namespace here: %v: %s", err, out)
	}
	return nil
}

// New makes an empty lab with the internet segment (a bridge inside the lab's "net"
// namespace). It first removes what killed runs left behind (Sweep).
func New() (*Lab, error) {
	Sweep()
	tag := make([]byte, 3)
	if _, err := rand.Read(tag); err != nil {
		return nil, err
	}
	l := &Lab{prefix: fmt.Sprintf("nl-%d-%s", os.Getpid(), hex.EncodeToString(tag))}
	net, err := l.namespace("net")
	if err != nil {
		l.Close()
		return nil, err
	}
	if err := net.ip("link", "add", "br0", "type", "bridge"); err != nil {
		l.Close()
		return nil, err
	}
	if err := net.ip("link", "set", "dev", "br0", "up"); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Prefix is the start of every name this lab made.
func (l *Lab) Prefix() string { return l.prefix }

// Host is one namespace of the lab: a public host, a router or a home host.
type Host struct {
	lab  *Lab
	Name string // the namespace's name
	Addr string // its address on the segment it was attached to ("" for the internet's)
}

// namespace makes the namespace prefix-name with loopback up and IPv6 off (the lab is IPv4).
func (l *Lab) namespace(name string) (*Host, error) {
	h := &Host{lab: l, Name: l.prefix + "-" + name}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, errClosed
	}
	l.nss = append(l.nss, h.Name)
	l.mu.Unlock()
	if out, err := run("ip", "netns", "add", h.Name); err != nil {
		return nil, fmt.Errorf("ip netns add %s: %v: %s", h.Name, err, out)
	}
	for _, args := range [][]string{
		{"sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"},
		{"sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"},
		{"ip", "link", "set", "dev", "lo", "up"},
	} {
		if out, err := h.Run(args...); err != nil {
			return nil, fmt.Errorf("%s: %s: %v: %s", h.Name, strings.Join(args, " "), err, out)
		}
	}
	return h, nil
}

// link makes a veth pair: ifA in a, ifB in b, both up, ifB a port of bridge br in b.
func link(a *Host, ifA string, b *Host, ifB, br string) error {
	if out, err := run("ip", "link", "add", ifA, "netns", a.Name, "type", "veth", "peer", "name", ifB, "netns", b.Name); err != nil {
		return fmt.Errorf("veth %s/%s: %v: %s", a.Name, b.Name, err, out)
	}
	if err := b.ip("link", "set", "dev", ifB, "master", br, "up"); err != nil {
		return err
	}
	return a.ip("link", "set", "dev", ifA, "up")
}

// Public adds a host on the internet at addr (in Internet).
func (l *Lab) Public(name, addr string) (*Host, error) {
	h, err := l.namespace(name)
	if err != nil {
		return nil, err
	}
	h.Addr = addr
	if err := link(h, "eth0", l.net(), name, "br0"); err != nil {
		return nil, err
	}
	return h, h.ip("addr", "add", addr+"/24", "dev", "eth0")
}

func (l *Lab) net() *Host { return &Host{lab: l, Name: l.prefix + "-net"} }

// Run runs a command inside the host's namespace and returns its combined output.
func (h *Host) Run(args ...string) ([]byte, error) {
	return run(append([]string{"ip", "netns", "exec", h.Name}, args...)...)
}

func (h *Host) ip(args ...string) error {
	out, err := run(append([]string{"ip", "-n", h.Name}, args...)...)
	if err != nil {
		return fmt.Errorf("%s: ip %s: %v: %s", h.Name, strings.Join(args, " "), err, out)
	}
	return nil
}

// Close kills every process started in the lab and deletes its namespaces, with their links,
// bridges and NAT rules. It returns what could not be removed.
func (l *Lab) Close() error {
	l.mu.Lock()
	l.closed = true
	procs, nss := l.procs, l.nss
	l.procs, l.nss = nil, nil
	l.mu.Unlock()
	for _, p := range procs {
		p.Kill()
	}
	var errs []error
	for i := len(nss) - 1; i >= 0; i-- {
		if err := removeNamespace(nss[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeNamespace kills whatever still runs in ns and deletes it.
func removeNamespace(ns string) error {
	if out, err := run("ip", "netns", "pids", ns); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	if out, err := run("ip", "netns", "del", ns); err != nil && !strings.Contains(string(out), "No such file") {
		return fmt.Errorf("ip netns del %s: %v: %s", ns, err, out)
	}
	return nil
}

// Sweep removes the namespaces of labs whose process is gone (a run that was killed before
// it could close its labs). A live process's labs are left alone.
func Sweep() {
	out, err := run("ip", "netns", "list")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "nl-") {
			continue
		}
		parts := strings.SplitN(f[0], "-", 3)
		pid, err := strconv.Atoi(parts[1])
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue
		}
		_ = removeNamespace(f[0])
	}
}

func run(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	return exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
}
