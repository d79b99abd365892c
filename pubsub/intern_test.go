package pubsub

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/iacp-node/iacp-node/protocol"
)

// The certificate a heartbeat carries is kept by every node that hears it (its certificate
// book, one per agent): the nodes of one process keep one copy of it, not one each. A
// simulator of 1000 nodes would otherwise hold 0.7 GB of certificates.
func TestHeartbeat_CarriedCertificateIsSharedByTheNodesOfAProcess(t *testing.T) {
	s := newSigner(t, "test:cert:agent", nil)
	beat := func() *protocol.Message {
		cert := "eyJ" + strings.Repeat("c", 600) // a certificate as each node decodes it
		m := &protocol.Message{}
		m.Envelope.Recipient = protocol.Recipient{AgentID: protocol.Broadcast, Channel: protocol.ChannelHealth}
		m.Envelope.TTLSeconds = 60
		m.Message = protocol.Body{Type: protocol.TypeHeartbeat, Intent: protocol.IntentHealth,
			Payload: []byte(`{"status":"alive","certificate":"` + cert + `"}`)}
		if err := s.b.Seal(m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	var certs []string
	for range 2 {
		g := oneNode(t)
		v := &validated{doc: beat()}
		if err := g.checkTopic(topicInfo{name: g.heartbeatTopic(), kind: kindHeartbeat}, v); err != nil {
			t.Fatal(err)
		}
		certs = append(certs, v.cert)
	}
	if certs[0] != certs[1] || unsafe.StringData(certs[0]) != unsafe.StringData(certs[1]) {
		t.Fatal("two nodes keep two copies of one certificate")
	}
}

// WithSeed makes the gossip layer's draws repeat from run to run (the simulator gives each
// node a seed of its scenario's); without it they come from the global source.
func TestWithSeed_RepeatsTheGossipLayersDraws(t *testing.T) {
	draw := func(opts ...Option) int64 { return oneNode(t, opts...).beatJitter().Int64N(1 << 40) }
	if a, b := draw(WithSeed(7)), draw(WithSeed(7)); a != b {
		t.Fatalf("seed 7 drew %d, then %d", a, b)
	}
	if a, b := draw(), draw(); a == b {
		t.Fatal("without a seed two nodes drew the same")
	}
}
