package sim

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/node"
)

// The node section's keys are node.Config's where the setting is the node's; the others are
// the simulator's own, listed here.
func TestNodeSpec_UsesNodeConfigNames(t *testing.T) {
	simOnly := map[string]bool{"bootstrap_peers": true}
	nodeKeys := map[string]bool{}
	ct := reflect.TypeFor[node.Config]()
	for i := 0; i < ct.NumField(); i++ {
		key, _, _ := strings.Cut(ct.Field(i).Tag.Get("yaml"), ",")
		nodeKeys[key] = true
	}
	st := reflect.TypeFor[NodeSpec]()
	for i := 0; i < st.NumField(); i++ {
		key, _, _ := strings.Cut(st.Field(i).Tag.Get("yaml"), ",")
		if nodeKeys[key] == simOnly[key] {
			t.Errorf("node.%s (NodeSpec.%s): a key is either node.Config's or one of the simulator's own %v", key, st.Field(i).Name, simOnly)
		}
	}
}

// A scenario without a node section runs every node on NodeProfile, which node.New accepts.
func TestNodeProfile_IsTheDefault(t *testing.T) {
	p := NodeProfile()
	p.AgentID = "sim:mesh:agent0000"
	if err := p.Validate(); err != nil {
		t.Fatalf("NodeProfile: %v", err)
	}
	sc, err := Parse([]byte("steps: [{join: {}}]"))
	if err != nil {
		t.Fatal(err)
	}
	got, want := sc.Node.nodeConfig(7), NodeProfile()
	want.Seed = 7 // each node's own jitter source
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("a scenario without a node section:\n got %+v\nwant %+v", got, want)
	}
}

// Every key of the node section reaches the node's configuration.
func TestNodeSpec_ReachesTheNode(t *testing.T) {
	sc, err := Parse([]byte(`
node: {heartbeat_interval: 2s, rate_per_second: 50, conn_low: 8, conn_high: 16, conn_grace: 3s,
       retry_min: 100ms, retry_max: 2s, discovery: false, gossip: false, durable: false, audit: false,
       dht_quorum: 2, dht_bucket_size: 5, suspect_after: 4}
steps: [{join: {}}]`))
	if err != nil {
		t.Fatal(err)
	}
	c := sc.Node.nodeConfig(1)
	want := NodeProfile()
	want.HeartbeatInterval, want.RatePerSecond, want.RateBurst = 2*time.Second, 50, 100
	want.ConnLow, want.ConnHigh, want.ConnGrace = 8, 16, 3*time.Second
	want.RetryMin, want.RetryMax = 100*time.Millisecond, 2*time.Second
	want.Discovery, want.Gossip, want.Durable, want.Audit = false, false, false, false
	want.DHTQuorum, want.DHTBucketSize, want.SuspectAfter, want.Seed = 2, 5, 4, 1
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("node section not applied:\n got %+v\nwant %+v", c, want)
	}
}
