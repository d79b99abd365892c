package discovery

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/iacp-node/iacp-node/protocol"
)

// vectorRecord is a record signed by a fixed key: Ed25519 signatures are deterministic, so
// SignRecord must produce recordVector byte for byte, and DecodeRecord must accept it. The
// vector was produced before the record's canonicaliser changed (it was gowebpki/jcs.Transform
// over encoding/json's output, and is now protocol.CanonicalJSON); records already stored in
// DHTs must keep verifying.
func vectorRecord(t *testing.T) (Record, crypto.PrivKey) {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i + 1)
	}
	sk, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	return Record{
		AgentID: "acme:host-1:planner", PeerID: id, Seq: 1_780_000_000_123_456_789,
		Expires: time.UnixMilli(1_780_003_600_123),
		Addrs:   []ma.Multiaddr{ma.StringCast("/ip4/192.0.2.7/tcp/4001"), ma.StringCast("/ip6/2001:db8::7/udp/4001/quic-v1")},
		Manifest: protocol.Manifest{
			AgentID: "acme:host-1:planner", Name: "Planner \u00e9\u00e8 \U0001F600 \"<q>\"\n", Tools: []string{"terminal", "web"},
			Models: []string{"llama3"}, MaxContextTokens: 128000, Domains: []string{"security"},
			RateLimit: protocol.RateLimit{RequestsPerMinute: 60}, TrustScore: 0.875, Deployment: "on-prem",
			Version: "1.2.3", UptimeSeconds: 86400,
		},
		Cert: "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJhY21lOmhvc3QtMTpwbGFubmVyIn0.c2ln",
	}, sk
}

const recordVector = `{"record":{"addrs":["/ip4/192.0.2.7/tcp/4001","/ip6/2001:db8::7/udp/4001/quic-v1"],"agent_id":"acme:host-1:planner","cert":"eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJhY21lOmhvc3QtMTpwbGFubmVyIn0.c2ln","expires_unix_ms":1780003600123,"manifest":{"agent_id":"acme:host-1:planner","deployment":"on-prem","domains":["security"],"max_context_tokens":128000,"models":["llama3"],"name":"Planner éè 😀 \"\u003cq\u003e\"\n","rate_limit":{"requests_per_minute":60},"tools":["terminal","web"],"trust_score":0.875,"uptime_seconds":86400,"version":"1.2.3"},"peer_id":"12D3KooWJ1TsijH7H5F74hfAD5XishQz3sxrmAtVY37GtNd9CqYf","seq":"1780000000123456789","v":1},"sig":"f/uV4/YLlNAb2IU8kRhg5TFuJigTY7uNZk+sxjc4XhBNfaS6ZtIbiyXwVYr8QuMe/qMWZMpDuEAvzRz7xiZABg=="}`

func TestRecordVector_SignsAndVerifiesAsBefore(t *testing.T) {
	r, sk := vectorRecord(t)
	got, err := SignRecord(r, sk)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != recordVector {
		t.Fatalf("SignRecord changed its output\n got: %s\nwant: %s", got, recordVector)
	}
	d, err := DecodeRecord([]byte(recordVector))
	if err != nil {
		t.Fatal(err)
	}
	if d.AgentID != r.AgentID || d.PeerID != r.PeerID || d.Seq != r.Seq || !d.Expires.Equal(r.Expires) ||
		len(d.Addrs) != 2 || d.Manifest.Name != r.Manifest.Name || d.Manifest.TrustScore != r.Manifest.TrustScore || d.Cert != r.Cert {
		t.Fatalf("decoded %+v, want %+v", d, r)
	}
}

// A manifest number that a double does not hold exactly is refused, as in an IACP message:
// RFC 8785 would sign the rounded double, and the record would say another number than its
// publisher gave.
func TestSignRecord_RefusesANumberBeyondDouble(t *testing.T) {
	r, sk := vectorRecord(t)
	r.Manifest.UptimeSeconds = 1<<53 + 1
	if _, err := SignRecord(r, sk); err == nil || !strings.Contains(err.Error(), "not exactly representable") {
		t.Fatalf("err = %v, want a refusal of the number", err)
	}
}
