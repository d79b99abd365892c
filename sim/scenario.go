package sim

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/iacp-node/iacp-node/node"
)

// Scenario is one simulation script. Parse reads it from YAML; docs/sim.md describes every
// field. Zero fields take the defaults of defaults().
type Scenario struct {
	// Name identifies the scenario in reports; Description says what it shows.
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Nodes is how many nodes the scenario runs (2 to MaxNodes). Default 10.
	Nodes int `yaml:"nodes"`
	// Seed seeds every random choice of the script. Default 1.
	Seed uint64 `yaml:"seed"`
	// Trust is the nodes' trust mode: "authority" (default) or "open". Under authority node
	// 0 holds the mesh authority and every other node joins by invitation, as
	// `iacp-node init --join` does (docs/sim.md, "Trust"); open runs every node in trust on
	// first use.
	Trust string `yaml:"trust"`
	// Virtual runs the scenario in virtual time (docs/sim.md, "Virtual time"): the nodes'
	// clock moves only when every goroutine waits, so what they do does not depend on how
	// busy the machine is. Mocknet only. Default false; iacp-node sim --virtual sets it.
	Virtual bool `yaml:"virtual"`
	// Cost is the CPU cost model of virtual time (ignored in real time).
	Cost CostSpec `yaml:"cost"`
	// MemoryLimit is the process's soft memory limit while a virtual run lasts, like
	// GOMEMLIMIT (which, when set, wins): past it Go's collector runs more often, which in
	// virtual time costs wall time only. "7GiB", "512MiB"; default none.
	MemoryLimit Bytes `yaml:"memory_limit"`
	// Network is the medium between the nodes.
	Network NetworkSpec `yaml:"network"`
	// Node tunes every node.
	Node NodeSpec `yaml:"node"`
	// Agents describes the synthetic agents the nodes serve.
	Agents AgentSpec `yaml:"agents"`
	// Steps run in order.
	Steps []Step `yaml:"steps"`
}

// MaxNodes bounds Scenario.Nodes: far above what one machine holds, low enough to catch a
// typo (10000 where 1000 was meant).
const MaxNodes = 5000

// Transports.
const (
	TransportMocknet  = "mocknet"  // go-libp2p's in-memory network (default)
	TransportLoopback = "loopback" // real TCP sockets on 127.0.0.1
)

// NetworkSpec is the medium between the nodes.
type NetworkSpec struct {
	// Transport is "mocknet" (default) or "loopback".
	Transport string `yaml:"transport" json:"transport"`
	// Latency is the one-way delay of every link (mocknet only). Default 0.
	Latency Duration `yaml:"latency" json:"latency"`
	// Jitter spreads the links' latencies (mocknet only): each link's latency is drawn once,
	// when it is made, uniformly within Latency±Jitter. Delays thus differ between pairs of
	// nodes, not from packet to packet. Default 0.
	Jitter Duration `yaml:"jitter" json:"jitter"`
	// Bandwidth is each link's capacity in bytes per second (mocknet only); 0 is unlimited.
	Bandwidth float64 `yaml:"bandwidth" json:"bandwidth"`
	// Tick is the grain of virtual time (virtual runs only): every write arrives at the
	// first multiple of Tick at or after the time the link and the cost model give it, so
	// that what falls within one tick happens at one instant, which the machine's cores run
	// together instead of one after the other. Default DefaultVirtualTick; 0 keeps the exact
	// times (docs/sim.md, "Virtual time").
	Tick Duration `yaml:"tick" json:"tick,omitempty"`

	// delayGiven says the scenario set latency or jitter (even to 0): a virtual run gives a
	// network that says neither DefaultVirtualLatency and DefaultVirtualJitter. tickGiven
	// says it set tick (even to 0).
	delayGiven, tickGiven bool
}

// The links of a virtual run whose scenario sets no latency and no jitter: 20 ms ± 10 ms one
// way, a region's internet rather than one machine's memory. With free CPU and no latency a
// join of N nodes would happen at one virtual instant (docs/sim.md, "Virtual time").
const (
	DefaultVirtualLatency = 20 * time.Millisecond
	DefaultVirtualJitter  = 10 * time.Millisecond
	// DefaultVirtualTick is the grain of a virtual run's deliveries (NetworkSpec.Tick): at 1
	// ms a 200-node join took 65 s of wall time where it took 116 s at the nanosecond, and 5
	// ms gained nothing more.
	DefaultVirtualTick = time.Millisecond
	// MaxTick bounds NetworkSpec.Tick: a coarser grain would be a latency of its own.
	MaxTick = 10 * time.Millisecond
)

// NodeSpec tunes every node: the scenario's node section, applied over NodeProfile. A key
// that names a setting of node.Config has node.Config's name (heartbeat_interval,
// rate_per_second, conn_low, ...; docs/node.md); suspect_after, bootstrap_peers,
// dht_bucket_size and quorum are the simulator's own. A key left out keeps NodeProfile's
// value; Parse fills every field.
type NodeSpec struct {
	// HeartbeatInterval is how often each node announces its status (1s to 300s).
	HeartbeatInterval Duration `yaml:"heartbeat_interval"`
	// SuspectAfter is how many missed beats make an agent suspect (1 to 100). Default
	// node.DefaultConfig's.
	SuspectAfter int `yaml:"suspect_after"`
	// MeshBudget is node.Config's mesh_budget: about how many beats per interval the
	// heartbeat topic carries before beats stretch (docs/scale.md). Default node.DefaultConfig's.
	MeshBudget int `yaml:"mesh_budget"`
	// BootstrapPeers is how many of the first nodes every other node bootstraps from. They
	// are never picked at random by kill, churn or offline. Default 1.
	BootstrapPeers int `yaml:"bootstrap_peers"`
	// Discovery and Gossip switch the DHT and gossipsub.
	Discovery *bool `yaml:"discovery"`
	Gossip    *bool `yaml:"gossip"`
	// DHTBucketSize is the Kademlia bucket size (k); smaller saves memory in large meshes.
	// Default 0: the profile's (node.DefaultConfig's, 20).
	DHTBucketSize int `yaml:"dht_bucket_size"`
	// DHTQuorum is how many DHT peers must answer a record lookup. Default 0: the profile's
	// (node.DefaultConfig's, 3).
	DHTQuorum int `yaml:"dht_quorum"`
	// Durable and Audit switch the node's durable delivery (on-disk outbox and inbox) and its
	// audit log.
	Durable *bool `yaml:"durable"`
	Audit   *bool `yaml:"audit"`
	// RetryMin and RetryMax bound durable delivery's retry backoff.
	RetryMin Duration `yaml:"retry_min"`
	RetryMax Duration `yaml:"retry_max"`
	// ConnLow, ConnHigh and ConnGrace are each node's connection manager: above ConnHigh
	// connections it closes the least valued down to ConnLow, sparing those younger than
	// ConnGrace. Lower values save memory in large meshes: on mocknet every connection
	// carries gossipsub and DHT streams. Given only one of ConnLow and ConnHigh, the other
	// is the profile's, moved as far as needed to keep ConnLow <= ConnHigh.
	ConnLow   int      `yaml:"conn_low"`
	ConnHigh  int      `yaml:"conn_high"`
	ConnGrace Duration `yaml:"conn_grace"`
	// RatePerSecond is each node's inbound message limit per peer, in bursts of twice as
	// many (node.Config's rate_burst).
	RatePerSecond float64 `yaml:"rate_per_second"`
}

// renamedNodeKeys maps a key the node section once had to the one that replaced it, so that
// an old scenario is refused with the new name rather than with "field not found".
var renamedNodeKeys = map[string]string{"heartbeat": "heartbeat_interval", "quorum": "dht_quorum"}

// checkRenamed refuses a node section that uses a key of renamedNodeKeys. Other problems of
// the document are left to the strict decode, which reports them.
func checkRenamed(data []byte) error {
	for _, k := range sectionKeys(data, "node") {
		if to, ok := renamedNodeKeys[k.Value]; ok {
			return fmt.Errorf("scenario: line %d: node.%s is now node.%s, node.Config's name for the setting (docs/sim.md)",
				k.Line, k.Value, to)
		}
	}
	return nil
}

// hasKey reports whether the document's section names key.
func hasKey(data []byte, section, key string) bool {
	return slices.ContainsFunc(sectionKeys(data, section), func(k *yaml.Node) bool { return k.Value == key })
}

// sectionKeys returns the keys of a top-level mapping of the document (none when it has no
// such section, or is no mapping).
func sectionKeys(data []byte, section string) []*yaml.Node {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	root := doc.Content[0].Content
	var keys []*yaml.Node
	for i := 0; i+1 < len(root); i += 2 {
		if root[i].Value != section || root[i+1].Kind != yaml.MappingNode {
			continue
		}
		sec := root[i+1].Content
		for j := 0; j+1 < len(sec); j += 2 {
			keys = append(keys, sec[j])
		}
	}
	return keys
}

// AgentSpec describes the synthetic agents: each draws between PerAgent.Min and PerAgent.Max
// distinct capabilities, weighted by Capabilities, and answers requests after a delay drawn
// from HandlerDelay.
type AgentSpec struct {
	Capabilities []CapabilityWeight `yaml:"capabilities"`
	PerAgent     struct {
		Min int `yaml:"min"`
		Max int `yaml:"max"`
	} `yaml:"per_agent"`
	HandlerDelay Range `yaml:"handler_delay"`
}

// CapabilityWeight is one capability and how likely an agent is to have it.
type CapabilityWeight struct {
	// Kind is tool (default), model or domain.
	Kind string `yaml:"kind"`
	// Name is the capability (also its gossip group).
	Name string `yaml:"name"`
	// Weight is the relative chance of drawing it. Default 1.
	Weight float64 `yaml:"weight"`
}

// Step is one line of the script: exactly one action with its parameters, an optional label
// and the expectations checked on what the step measured.
type Step struct {
	// Name labels the step in reports (default: the action).
	Name string
	// Action is the step kind: join, converge, discover, load, broadcast, group, kill,
	// restart, partition, heal, churn, offline or sleep.
	Action string
	// Expect maps a metric to a condition: a number (equal) or a string "<= 50", ">= 0.99",
	// "< 3", "> 0", "== 0", "!= 0".
	Expect map[string]any
	// params is the action's parameters, decoded strictly by the action's handler.
	params yaml.Node
}

// UnmarshalYAML reads {<action>: {params...}, name: ..., expect: {...}}.
func (s *Step) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a step is a mapping like {load: {rate: 50, duration: 5s}}", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		switch k {
		case "name":
			if err := v.Decode(&s.Name); err != nil {
				return err
			}
		case "expect":
			if err := v.Decode(&s.Expect); err != nil {
				return fmt.Errorf("line %d: expect is a mapping of metric to condition: %w", v.Line, err)
			}
		default:
			if _, ok := actions[k]; !ok {
				return fmt.Errorf("line %d: unknown step %q; steps are %s", n.Content[i].Line, k, strings.Join(actionNames(), ", "))
			}
			if s.Action != "" {
				return fmt.Errorf("line %d: a step has one action; this one has %q and %q", n.Content[i].Line, s.Action, k)
			}
			s.Action, s.params = k, *v
		}
	}
	if s.Action == "" {
		return fmt.Errorf("line %d: the step names no action; steps are %s", n.Line, strings.Join(actionNames(), ", "))
	}
	if s.Name == "" {
		s.Name = s.Action
	}
	return nil
}

// decodeParams decodes the step's parameters into v, refusing unknown fields.
func (s *Step) decodeParams(v any) error {
	if s.params.Kind == 0 || s.params.Tag == "!!null" {
		return nil
	}
	raw, err := yaml.Marshal(&s.params)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("step %q (line %d): %w", s.Name, s.params.Line, err)
	}
	return nil
}

// Parse reads a scenario from YAML, fills defaults and validates it.
func Parse(data []byte) (*Scenario, error) {
	if err := checkRenamed(data); err != nil {
		return nil, err
	}
	sc := &Scenario{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(sc); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	sc.Network.delayGiven = hasKey(data, "network", "latency") || hasKey(data, "network", "jitter")
	sc.Network.tickGiven = hasKey(data, "network", "tick")
	sc.defaults()
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	return sc, nil
}

func (sc *Scenario) defaults() {
	if sc.Nodes == 0 {
		sc.Nodes = 10
	}
	if sc.Seed == 0 {
		sc.Seed = 1
	}
	if sc.Network.Transport == "" {
		sc.Network.Transport = TransportMocknet
	}
	if sc.Trust == "" {
		sc.Trust = node.TrustAuthority
	}
	sc.Node.fillFrom(NodeProfile())
	a := &sc.Agents
	if len(a.Capabilities) == 0 {
		a.Capabilities = []CapabilityWeight{{Name: "terminal", Weight: 3}, {Name: "browser", Weight: 2}, {Name: "search", Weight: 1}}
	}
	for i := range a.Capabilities {
		if a.Capabilities[i].Kind == "" {
			a.Capabilities[i].Kind = "tool"
		}
		if a.Capabilities[i].Weight == 0 {
			a.Capabilities[i].Weight = 1
		}
	}
	if a.PerAgent.Min == 0 {
		a.PerAgent.Min = 1
	}
	if a.PerAgent.Max == 0 {
		a.PerAgent.Max = max(a.PerAgent.Min, min(2, len(a.Capabilities)))
	}
}

// Validate checks the scenario, naming the field and the allowed range of the first bad value.
// Step parameters are checked too, by decoding them.
func (sc *Scenario) Validate() error {
	switch {
	case sc.Nodes < 2 || sc.Nodes > MaxNodes:
		return fmt.Errorf("nodes: %d is outside 2..%d", sc.Nodes, MaxNodes)
	case sc.Trust != node.TrustAuthority && sc.Trust != node.TrustOpen:
		return fmt.Errorf("trust: %q is neither %q nor %q", sc.Trust, node.TrustAuthority, node.TrustOpen)
	case sc.Network.Transport != TransportMocknet && sc.Network.Transport != TransportLoopback:
		return fmt.Errorf("network.transport: %q is neither %q nor %q", sc.Network.Transport, TransportMocknet, TransportLoopback)
	case sc.Virtual && sc.Network.Transport != TransportMocknet:
		return fmt.Errorf("virtual: a run in virtual time needs transport mocknet (a socket's read is a system call, during which virtual time cannot move)")
	case sc.Cost.Verify < 0 || sc.Cost.Message < 0 || sc.Cost.KiB < 0:
		return fmt.Errorf("cost: verify, message and kib must not be negative")
	case sc.Network.Transport == TransportLoopback && (sc.Network.Latency > 0 || sc.Network.Jitter > 0 || sc.Network.Bandwidth > 0):
		return fmt.Errorf("network: latency, jitter and bandwidth need transport mocknet; loopback sockets run at the kernel's speed")
	case sc.Network.Jitter > sc.Network.Latency:
		return fmt.Errorf("network.jitter: %s exceeds latency %s (a delay cannot be negative)", sc.Network.Jitter, sc.Network.Latency)
	case sc.Network.Bandwidth < 0:
		return fmt.Errorf("network.bandwidth: %v is negative", sc.Network.Bandwidth)
	case sc.Network.Tick < 0 || sc.Network.Tick.D() > MaxTick:
		return fmt.Errorf("network.tick: %s is outside 0..%s (0: exact times)", sc.Network.Tick, Duration(MaxTick))
	case sc.Node.BootstrapPeers < 1 || sc.Node.BootstrapPeers >= sc.Nodes:
		return fmt.Errorf("node.bootstrap_peers: %d is outside 1..%d (nodes-1)", sc.Node.BootstrapPeers, sc.Nodes-1)
	case sc.Node.RetryMin <= 0 || sc.Node.RetryMax < sc.Node.RetryMin:
		return fmt.Errorf("node.retry_min, retry_max: %s, %s must satisfy 0 < retry_min <= retry_max", sc.Node.RetryMin, sc.Node.RetryMax)
	case sc.Node.DHTBucketSize < 0 || sc.Node.DHTQuorum < 0 || sc.Node.RatePerSecond < 0:
		return fmt.Errorf("node: dht_bucket_size, quorum and rate_per_second must not be negative")
	case sc.Node.ConnLow < 1 || sc.Node.ConnHigh < sc.Node.ConnLow:
		return fmt.Errorf("node.conn_low, conn_high: %d, %d must satisfy 1 <= conn_low <= conn_high", sc.Node.ConnLow, sc.Node.ConnHigh)
	case sc.Agents.PerAgent.Min < 1 || sc.Agents.PerAgent.Max < sc.Agents.PerAgent.Min || sc.Agents.PerAgent.Max > len(sc.Agents.Capabilities):
		return fmt.Errorf("agents.per_agent: min %d, max %d must satisfy 1 <= min <= max <= %d (the capabilities listed)",
			sc.Agents.PerAgent.Min, sc.Agents.PerAgent.Max, len(sc.Agents.Capabilities))
	case len(sc.Steps) == 0:
		return fmt.Errorf("steps: the scenario has none; start with {join: {}} and {converge: {}}")
	}
	// The node section as every node gets it: node.Config's own checks, in its names.
	probe := sc.Node.nodeConfig(sc.Seed)
	probe.AgentID, probe.DataDir = agentIDOf(0), "probe"
	if err := probe.Validate(); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if err := sc.Agents.HandlerDelay.validate("agents.handler_delay"); err != nil {
		return err
	}
	if err := sc.Agents.validateCapabilities(); err != nil {
		return err
	}
	for i := range sc.Steps {
		st := &sc.Steps[i]
		a := actions[st.Action]
		if _, err := a.parse(st, sc); err != nil {
			return fmt.Errorf("steps[%d] (%s): %w", i, st.Name, err)
		}
		for k, v := range st.Expect {
			if _, err := parseCondition(v); err != nil {
				return fmt.Errorf("steps[%d] (%s): expect.%s: %w", i, st.Name, k, err)
			}
		}
	}
	return nil
}

// validateCapabilities checks the capabilities the agents draw from: a known kind, a name
// that can be a group, listed once, with a positive weight.
func (a *AgentSpec) validateCapabilities() error {
	seen := map[string]bool{}
	for i, c := range a.Capabilities {
		if c.Kind != "tool" && c.Kind != "model" && c.Kind != "domain" {
			return fmt.Errorf("agents.capabilities[%d].kind: %q is not tool, model or domain", i, c.Kind)
		}
		if err := node.ValidateGroup(c.Name); err != nil {
			return fmt.Errorf("agents.capabilities[%d].name: %w", i, err)
		}
		if seen[c.Name] {
			return fmt.Errorf("agents.capabilities[%d].name: %q is listed twice", i, c.Name)
		}
		seen[c.Name] = true
		if c.Weight <= 0 {
			return fmt.Errorf("agents.capabilities[%d].weight: %v must be positive", i, c.Weight)
		}
	}
	return nil
}

// hasCapability reports whether the scenario lists a capability name.
func (sc *Scenario) hasCapability(name string) bool {
	return slices.ContainsFunc(sc.Agents.Capabilities, func(c CapabilityWeight) bool { return c.Name == name })
}

func actionNames() []string {
	out := make([]string, 0, len(actions))
	for k := range actions {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
