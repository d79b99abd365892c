package netlab

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
)

// labNode is one iacp-node in a host of the lab: its data directory (on the machine's file
// system, which the namespaces share) and its process. Every command a test gives it runs the
// binary inside the host's namespace, as its operator would (`iacp-node peers`, `send`, ...),
// talking to the node's local API on the namespace's own loopback.
type labNode struct {
	t     testing.TB
	host  *Host
	name  string
	dir   string
	agent string
	args  []string // run flags
	env   []string // more environment for run, NAME=value
	proc  *Proc
}

// publicArgs are the run flags of a public node: fixed ports, declared public, serving a relay.
var publicArgs = []string{"--listen", "/ip4/0.0.0.0/tcp/4001", "--listen", "/ip4/0.0.0.0/udp/4001/quic-v1",
	"--reachability", "public", "--relay"}

// found initialises a node that founds a mesh (it holds the mesh authority's key).
func found(t testing.TB, h *Host, agent string, args ...string) *labNode {
	t.Helper()
	n := &labNode{t: t, host: h, name: agent, dir: filepath.Join(t.TempDir(), "node"), agent: agent, args: args}
	n.init("--agent-id", agent)
	return n
}

// join initialises a node that joins founder's mesh with an invitation, through whatever
// NAT lies between them: init --join fetches the node's certificate from the founder.
func join(t testing.TB, h *Host, founder *labNode, agent string, args ...string) *labNode {
	t.Helper()
	n := &labNode{t: t, host: h, name: agent, dir: filepath.Join(t.TempDir(), "node"), agent: agent, args: args}
	n.init("--join", founder.invite(agent))
	if _, err := os.Stat(filepath.Join(n.dir, "agent.cert")); err != nil {
		t.Fatalf("%s joined without its certificate: %v", agent, err)
	}
	return n
}

func (n *labNode) init(args ...string) {
	n.t.Helper()
	out, err := n.host.Run(append([]string{binary, "init", "--data-dir", n.dir}, args...)...)
	if err != nil {
		n.t.Fatalf("init %s: %v\n%s", n.name, err, out)
	}
	cfg := filepath.Join(n.dir, "config.yaml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	s := strings.Replace(string(b), "retry_min: 1s", "retry_min: 200ms", 1)
	s = strings.Replace(s, "retry_max: 1m0s", "retry_max: 2s", 1)
	// A send waits for its first attempt, which a dial into a cut network holds for the frame
	// timeout: 3 s rather than 10 keeps the scenarios short.
	s = strings.Replace(s, "frame_timeout: 10s", "frame_timeout: 3s", 1)
	if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
		n.t.Fatal(err)
	}
}

// start runs the node and waits until its local API answers.
func (n *labNode) start() {
	n.t.Helper()
	env := n.env
	if lv := os.Getenv("NETLAB_GOLOG"); lv != "" {
		env = append(env, "GOLOG_LOG_LEVEL="+lv) // e.g. warn,p2p-holepunch=debug
	}
	args := append(append([]string{"env"}, env...), binary, "run", "--data-dir", n.dir, "--api", "127.0.0.1:9700",
		"--heartbeat-interval", "1s", "--log-level", "warn")
	args = append(args, n.args...)
	p, err := n.host.Start(args...)
	if err != nil {
		n.t.Fatal(err)
	}
	n.proc = p
	testsupport.WaitFor(n.t, 20*time.Second, n.name+"'s local API", func() bool {
		select {
		case <-p.Done():
			n.t.Fatalf("%s exited: %v\n%s", n.name, p.Err(), p.Output())
		default:
		}
		_, err := n.cli("status")
		return err == nil
	})
}

// kill stops the node with SIGKILL.
func (n *labNode) kill() {
	if n.proc != nil {
		n.proc.Kill()
		n.proc = nil
	}
}

// stop stops the node with SIGTERM and waits for it.
func (n *labNode) stop() {
	n.t.Helper()
	n.proc.Signal(syscall.SIGTERM)
	if err := n.proc.Err(); err != nil {
		n.t.Fatalf("%s did not stop cleanly: %v\n%s", n.name, err, n.proc.Output())
	}
	n.proc = nil
}

// cli runs an iacp-node command against this node, inside its host.
func (n *labNode) cli(args ...string) ([]byte, error) {
	out, err := n.host.Run(append(append([]string{binary}, args...), "--data-dir", n.dir)...)
	if err != nil {
		return out, fmt.Errorf("%s: iacp-node %s: %v: %s", n.name, strings.Join(args, " "), err, out)
	}
	return out, nil
}

// json runs a command with -o json and decodes its output into v.
func (n *labNode) json(v any, args ...string) error {
	out, err := n.cli(append(args, "-o", "json")...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("%s: iacp-node %s: %v: %s", n.name, strings.Join(args, " "), err, out)
	}
	return nil
}

func (n *labNode) invite(agent string) string {
	n.t.Helper()
	var doc struct {
		Token string `json:"token"`
	}
	if err := n.json(&doc, "invite", "--agent", agent); err != nil || doc.Token == "" {
		n.t.Fatalf("invite %s: %v", agent, err)
	}
	return doc.Token
}

// bootArgs are --bootstrap flags for every address the node printed at start (TCP and QUIC).
func (n *labNode) bootArgs() []string {
	n.t.Helper()
	var args []string
	for _, line := range strings.Split(n.proc.Output(), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "listen" {
			args = append(args, "--bootstrap", f[1])
		}
	}
	if len(args) == 0 {
		n.t.Fatalf("%s printed no listen address:\n%s", n.name, n.proc.Output())
	}
	return args
}

// peers is `iacp-node peers -o json`.
type peersDoc struct {
	Peers []struct {
		PeerID string   `json:"peer_id"`
		Addrs  []string `json:"addrs"`
		Path   string   `json:"path"`
	} `json:"peers"`
	NAT struct {
		Reachability string   `json:"reachability"`
		Advertised   []string `json:"advertised"`
		Relays       []string `json:"relays"`
		Succeeded    int      `json:"hole_punches_succeeded"`
		Failed       int      `json:"hole_punches_failed"`
	} `json:"nat"`
}

func (n *labNode) peers() peersDoc {
	var d peersDoc
	if err := n.json(&d, "peers"); err != nil {
		n.t.Log(err)
	}
	return d
}

// pathTo is the path of this node's connection to peer id ("" when not connected).
func (n *labNode) pathTo(id string) string {
	for _, p := range n.peers().Peers {
		if p.PeerID == id {
			return p.Path
		}
	}
	return ""
}

// id is the node's peer id.
func (n *labNode) id() string {
	n.t.Helper()
	out, err := n.host.Run(binary, "id", "--data-dir", n.dir)
	for _, line := range strings.Split(string(out), "\n") {
		if id, ok := strings.CutPrefix(line, "peer id"); ok {
			return strings.TrimSpace(id)
		}
	}
	n.t.Fatalf("id %s: %v %s", n.name, err, out)
	return ""
}

// logs is the node's output so far, for a failure's message.
func (n *labNode) logs() string {
	if n.proc == nil {
		return ""
	}
	return n.proc.Output()
}
