package discovery

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

func testKey(t *testing.T) (crypto.PrivKey, peer.ID) {
	t.Helper()
	sk, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	return sk, id
}

func testRecord(id peer.ID, seq uint64, expires time.Time) Record {
	return Record{
		AgentID: agentID(1), PeerID: id, Seq: seq, Expires: expires,
		Addrs:    []ma.Multiaddr{ma.StringCast("/ip4/127.0.0.1/tcp/4001")},
		Manifest: manifestFor(1),
	}
}

func mustSign(t *testing.T, r Record, sk crypto.PrivKey) []byte {
	t.Helper()
	v, err := SignRecord(r, sk)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRecordRoundTrip(t *testing.T) {
	clock := newFakeClock()
	sk, id := testKey(t)
	r := testRecord(id, 1_777_000_000_123_456_789, clock.Now().Add(time.Hour))
	r.Cert = "header.payload.signature"
	got, err := DecodeRecord(mustSign(t, r, sk))
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != r.Seq {
		t.Fatalf("seq %d came back as %d: a seq above 2^53 must survive JSON", r.Seq, got.Seq)
	}
	if got.AgentID != r.AgentID || got.PeerID != id || !got.Expires.Equal(r.Expires) || got.Left || got.Cert != r.Cert ||
		len(got.Addrs) != 1 || !got.Addrs[0].Equal(r.Addrs[0]) || got.Manifest.Deployment != "cloud" {
		t.Fatalf("round trip changed the record: %+v", got)
	}
}

func TestValidatorRefuses(t *testing.T) {
	clock := newFakeClock()
	sk, id := testKey(t)
	otherSK, otherID := testKey(t)
	now := clock.Now()
	v := Validator{Namespace: AgentNamespace, Now: clock.Now}
	key := AgentKey(agentID(1))
	good := testRecord(id, 10, now.Add(time.Hour))
	if err := v.Validate(key, mustSign(t, good, sk)); err != nil {
		t.Fatalf("a good record was refused: %v", err)
	}
	if err := (Validator{Namespace: PeerNamespace, Now: clock.Now}).Validate(PeerKey(id), mustSign(t, good, sk)); err != nil {
		t.Fatalf("a good record was refused under its peer key: %v", err)
	}

	// forged: names id but is signed by another key. SignRecord refuses that, so forge by hand:
	// sign as otherID and substitute the peer id in the signed body.
	forgedSrc := testRecord(otherID, 10, now.Add(time.Hour))
	var sr signedRecord
	if err := json.Unmarshal(mustSign(t, forgedSrc, otherSK), &sr); err != nil {
		t.Fatal(err)
	}
	sr.Record = json.RawMessage(strings.Replace(string(sr.Record), otherID.String(), id.String(), 1))
	forged, _ := json.Marshal(sr)

	expired := mustSign(t, testRecord(id, 10, now.Add(-time.Second)), sk)
	immortal := mustSign(t, testRecord(id, 10, now.Add(MaxRecordLifetime+time.Hour)), sk)
	big := testRecord(id, 10, now.Add(time.Hour))
	big.Manifest.Tools = []string{strings.Repeat("x", MaxRecordBytes)}
	if _, err := SignRecord(big, sk); err == nil {
		t.Fatal("SignRecord accepted an oversized record")
	}
	bigCert := good
	bigCert.Cert = strings.Repeat("c", MaxCertBytes+1)
	if _, err := SignRecord(bigCert, sk); err == nil {
		t.Fatal("SignRecord accepted an oversized certificate")
	}
	bigCert.Cert = strings.Repeat("c", MaxCertBytes)
	if err := v.Validate(key, mustSign(t, bigCert, sk)); err != nil {
		t.Fatalf("a certificate of MaxCertBytes was refused: %v", err)
	}
	oversized := append([]byte(`{"pad":"`+strings.Repeat("x", MaxRecordBytes)+`",`), mustSign(t, good, sk)[1:]...)
	wrongAgent := good
	wrongAgent.AgentID, wrongAgent.Manifest.AgentID = agentID(2), agentID(2)
	noManifest := mustSign(t, Record{AgentID: agentID(1), PeerID: id, Seq: 1, Expires: now.Add(time.Hour), Left: true}, sk)
	noManifest = []byte(strings.Replace(string(noManifest), `"left":true`, `"left":false`, 1))

	cases := map[string]struct {
		key string
		val []byte
	}{
		"forged (wrong key)":              {key, forged},
		"expired":                         {key, expired},
		"expiry too far ahead":            {key, immortal},
		"oversized":                       {key, oversized},
		"not JSON":                        {key, []byte("{not json")},
		"empty":                           {key, nil},
		"no signature":                    {key, []byte(`{"record":{"v":1}}`)},
		"other version":                   {key, []byte(strings.Replace(string(mustSign(t, good, sk)), `"v":1`, `"v":2`, 1))},
		"tampered manifest":               {key, []byte(strings.Replace(string(mustSign(t, good, sk)), `"cloud"`, `"on-prem"`, 1))},
		"tampered then no manifest":       {key, noManifest},
		"filed under another agent":       {key, mustSign(t, wrongAgent, sk)},
		"outside the namespace":           {"/iacp-other/" + agentID(1), mustSign(t, good, sk)},
		"bad signature encoding":          {key, []byte(strings.Replace(string(mustSign(t, good, sk)), `"sig":"`, `"sig":"!`, 1))},
		"bad address":                     {key, []byte(strings.Replace(string(mustSign(t, good, sk)), "/ip4/127.0.0.1/tcp/4001", "/nope", 1))},
		"bad agent id":                    {key, []byte(strings.Replace(string(mustSign(t, good, sk)), agentID(1), "bad", 2))},
		"peer id that embeds no key":      {key, []byte(strings.Replace(string(mustSign(t, good, sk)), id.String(), "QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N", 1))},
		"seq not a string":                {key, []byte(strings.Replace(string(mustSign(t, good, sk)), `"seq":"10"`, `"seq":10`, 1))},
		"record member not an object":     {key, []byte(`{"record":"x","sig":"AA=="}`)},
		"certificate added after signing": {key, []byte(strings.Replace(string(mustSign(t, good, sk)), `"agent_id"`, `"cert":"x","agent_id"`, 1))},
	}
	for name, c := range cases {
		if err := v.Validate(c.key, c.val); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := (Validator{Namespace: PeerNamespace, Now: clock.Now}).Validate(PeerKey(otherID), mustSign(t, good, sk)); err == nil {
		t.Error("a record was accepted under another peer's key")
	}
}

func TestValidatorSelectHighestSeq(t *testing.T) {
	clock := newFakeClock()
	sk, id := testKey(t)
	v := Validator{Namespace: AgentNamespace, Now: clock.Now}
	exp := clock.Now().Add(time.Hour)
	low, high := mustSign(t, testRecord(id, 5, exp), sk), mustSign(t, testRecord(id, 9, exp), sk)
	for _, c := range []struct {
		vals [][]byte
		want int
	}{
		{[][]byte{low, high}, 1},
		{[][]byte{high, low}, 0},
		{[][]byte{[]byte("junk"), low}, 1},
		{[][]byte{high, high}, 0},
	} {
		got, err := v.Select(AgentKey(agentID(1)), c.vals)
		if err != nil || got != c.want {
			t.Errorf("Select = %d, %v; want %d", got, err, c.want)
		}
	}
	if _, err := v.Select(AgentKey(agentID(1)), [][]byte{[]byte("junk")}); err == nil {
		t.Error("Select chose among only invalid values")
	}
}

func TestSignRecordRefusesAnotherKey(t *testing.T) {
	sk, _ := testKey(t)
	_, other := testKey(t)
	if _, err := SignRecord(testRecord(other, 1, time.Now().Add(time.Hour)), sk); err == nil {
		t.Fatal("signed a record naming another peer")
	}
}

func FuzzDecodeRecord(f *testing.F) {
	sk, _, _ := crypto.GenerateEd25519Key(nil)
	id, _ := peer.IDFromPrivateKey(sk)
	good, _ := SignRecord(testRecord(id, 1, time.Unix(1_800_000_000, 0)), sk)
	f.Add(good)
	certified := testRecord(id, 2, time.Unix(1_800_000_000, 0))
	certified.Cert = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ0ZXN0In0.c2ln"
	withCert, _ := SignRecord(certified, sk)
	f.Add(withCert)
	left, _ := SignRecord(Record{AgentID: agentID(1), PeerID: id, Seq: 3, Expires: time.Unix(1_800_000_000, 0), Left: true, Cert: "c"}, sk)
	f.Add(left)
	f.Add([]byte(`{"record":{},"sig":""}`))
	f.Add([]byte(`{"record":{"v":1,"cert":""},"sig":"AA=="}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			return
		}
		if r.PeerID == "" || r.AgentID == "" {
			t.Fatalf("decoded a record without identity: %+v", r)
		}
		if len(r.Cert) > MaxCertBytes {
			t.Fatalf("decoded a certificate of %d bytes", len(r.Cert))
		}
	})
}
