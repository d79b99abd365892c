package protocol_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

var update = flag.Bool("update", false, "rewrite docs/test-vectors from the generator")

// vectorDir is where the test vectors live, relative to this package.
const vectorDir = "../docs/test-vectors"

// vectorTime is the timestamp of every vector message, and vectorNow the instant at which
// the valid ones validate.
const (
	vectorTime = "2026-05-01T12:00:00.000Z"
	vectorNow  = "2026-05-01T12:00:10Z"
)

// vectorKey describes a fixed key in keys.json.
type vectorKey struct {
	Name                  string `json:"name"`
	SeedHex               string `json:"seed_hex"`
	PublicKeyHex          string `json:"public_key_hex"`
	PrivateKeyProtobufHex string `json:"private_key_protobuf_hex"`
	PublicKeyProtobufHex  string `json:"public_key_protobuf_hex"`
	PeerIDMultihashHex    string `json:"peer_id_multihash_hex"`
	PeerID                string `json:"peer_id"`
}

// validVector is one entry of vectors.json's "valid" list.
type validVector struct {
	Name          string `json:"name"`
	Description   string `json:"description"`
	Document      string `json:"document"`
	Canonical     string `json:"canonical"`
	SHA256Hex     string `json:"sha256_hex"`
	SignatureB64  string `json:"signature_base64"`
	SignerPeerID  string `json:"signer_peer_id"`
	ValidateAtUTC string `json:"now"`
}

// invalidVector is one entry of vectors.json's "invalid" list.
type invalidVector struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Document    string `json:"document"`
	Now         string `json:"now"`
	Code        string `json:"code"`
}

type vectorManifest struct {
	Keys    []vectorKey     `json:"keys"`
	Valid   []validVector   `json:"valid"`
	Invalid []invalidVector `json:"invalid"`
}

func describeKey(t testing.TB, name string, seed []byte) vectorKey {
	k := keyFromSeed(t, seed)
	priv, err := crypto.MarshalPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pubProto, err := crypto.MarshalPublicKey(k.GetPublic())
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := k.GetPublic().Raw()
	id, _ := peer.IDFromPrivateKey(k)
	return vectorKey{Name: name, SeedHex: hex.EncodeToString(seed), PublicKeyHex: hex.EncodeToString(raw),
		PrivateKeyProtobufHex: hex.EncodeToString(priv), PublicKeyProtobufHex: hex.EncodeToString(pubProto),
		PeerIDMultihashHex: hex.EncodeToString([]byte(id)), PeerID: id.String()}
}

// vectorBuilder signs as agent with the fixed key at vectorTime.
func vectorBuilder(t testing.TB, agent string, seed []byte) *protocol.Builder {
	now, _ := time.Parse(time.RFC3339, strings.TrimSuffix(vectorTime, ".000Z")+"Z")
	b, err := protocol.NewBuilder(agent, keyFromSeed(t, seed), func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sealed decodes doc (JSON) and seals it with the builder: what the doc sets is kept.
func sealed(t testing.TB, b *protocol.Builder, doc string) *protocol.Message {
	m, err := protocol.DecodeJSON([]byte(doc))
	if err != nil {
		t.Fatalf("vector source: %v\n%s", err, doc)
	}
	if err := b.Seal(m); err != nil {
		t.Fatal(err)
	}
	return m
}

// signedAsIs decodes doc and signs it without filling anything in.
func signedAsIs(t testing.TB, seed []byte, doc string) *protocol.Message {
	m, err := protocol.DecodeJSON([]byte(doc))
	if err != nil {
		t.Fatalf("vector source: %v\n%s", err, doc)
	}
	if err := protocol.Sign(m, keyFromSeed(t, seed)); err != nil {
		t.Fatal(err)
	}
	return m
}

const (
	idRequest   = "0190f5a4-7c3e-7000-8000-000000000001"
	idResponse  = "0190f5a4-7c3e-7000-8000-000000000002"
	idEvent     = "0190f5a4-7c3e-7000-8000-000000000003"
	idHeartbeat = "0190f5a4-7c3e-7000-8000-000000000004"
	idError     = "0190f5a4-7c3e-7000-8000-000000000005"
	idUnknown   = "0190f5a4-7c3e-7000-8000-000000000006"
)

func envelopeJSON(id, to, channel, extra string) string {
	return `{"version":"1.0","message_id":"` + id + `","timestamp":"` + vectorTime + `","ttl_seconds":3600,` +
		`"recipient":{"agent_id":"` + to + `","channel":"` + channel + `"}` + extra + `}`
}

type namedMessage struct {
	name, description string
	m                 *protocol.Message
}

// vectorMessages builds the valid vectors.
func vectorMessages(t testing.TB) []namedMessage {
	planner := vectorBuilder(t, "acme:host-1:planner", fixedSeed)
	analyst := vectorBuilder(t, "acme:host-2:analyst", otherSeed)
	req := sealed(t, planner, `{"envelope":`+envelopeJSON(idRequest, "acme:host-2:analyst", "handoff", "")+
		`,"message":{"type":"request","intent":"handoff","payload":{"task":"summarise the Q3 report","priority":2,"deadline":"2026-05-01T13:00:00Z"}}}`)
	resp := sealed(t, analyst, `{"envelope":`+envelopeJSON(idResponse, "acme:host-1:planner", "handoff", `,"correlation_id":"`+idRequest+`"`)+
		`,"message":{"type":"response","intent":"handoff","payload":{"status":"accepted","detail":"working on it","eta_seconds":120}}}`)
	event := sealed(t, planner, `{"envelope":`+envelopeJSON(idEvent, "*:*:builder", "notification", "")+
		`,"message":{"type":"event","intent":"notify","payload":{"event_type":"deploy.finished","severity":"info","data":{"service":"api","ok":true}}}}`)
	hb := sealed(t, planner, `{"envelope":`+envelopeJSON(idHeartbeat, "*", "health", "")+
		`,"message":{"type":"heartbeat","intent":"health","payload":{"status":"alive","load":0.25,"active_tasks":1,"version":"0.1.0"}}}`)
	errm := sealed(t, analyst, `{"envelope":`+envelopeJSON(idError, "acme:host-1:planner", "handoff", `,"correlation_id":"`+idRequest+`"`)+
		`,"message":{"type":"error","intent":"handoff","payload":{"code":"RATE_LIMITED","message":"too many requests","retryable":true,"retry_after":1.5}}}`)
	unknown := signedAsIs(t, fixedSeed, `{"x-top":{"z":1,"a":[true,false,null]},"envelope":`+
		`{"version":"1.1","message_id":"`+idUnknown+`","correlation_id":"","timestamp":"`+vectorTime+`","ttl_seconds":3600,`+
		`"sender":{"agent_id":"acme:host-1:planner","x-sender-ext":{"b":2,"a":1}},"recipient":{"agent_id":"acme:host-2:analyst","channel":"x-research","x-route":["eu","us"]},"x-envelope-ext":"kept"},`+
		`"message":{"type":"request","intent":"x-translate","x-body-ext":1.0,"payload":{`+
		`"text":"Grüße, 世界 😀","escapes":"tab\tquote\" backslash\\ bell\u0007 slash\/ \u2028","unicode_escape":"\u00e9",`+
		`"numbers":[1.50,1e21,1E-7,-0,0.000001,123456789012345680000,100,-12.5e2,9007199254740992],`+
		`"ordering":{"b":1,"a":2,"é":3,"😀":4,"ﬁ":5,"A":6,"_":7,"":8},"nothing":null}}}`)
	return []namedMessage{
		{"request", "a handoff request that starts its own chain", req},
		{"response", "the analyst's response, correlation_id = the request's message_id, signed by the second key", resp},
		{"event", "an event to a wildcard recipient", event},
		{"heartbeat", "a heartbeat to every agent", hb},
		{"error", "a RATE_LIMITED error in reply to the request, signed by the second key", errm},
		{"unknown-fields", "unknown members at every level, an empty correlation_id (kept, and signed), a MINOR version above ours, non-ASCII text, escapes, numbers that RFC 8785 rewrites, and names whose UTF-16 order differs from their code point order", unknown},
	}
}

type invalidCase struct {
	name, description, now string
	code                   protocol.Code
	doc                    []byte
}

// vectorInvalid builds the invalid vectors: each breaks exactly one rule.
func vectorInvalid(t testing.TB, valid []namedMessage) []invalidCase {
	req := valid[0].m
	enc := func(m *protocol.Message) []byte {
		b, err := protocol.EncodeJSON(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	resign := func(edit func(m *protocol.Message)) []byte {
		m := req.Clone()
		edit(m)
		if err := protocol.Sign(m, keyFromSeed(t, fixedSeed)); err != nil {
			t.Fatal(err)
		}
		return enc(m)
	}
	var out []invalidCase
	add := func(name, desc, now string, code protocol.Code, doc []byte) {
		out = append(out, invalidCase{name, desc, now, code, doc})
	}
	add("version-2.0", "another MAJOR version; the error lists the supported versions", vectorNow, protocol.CodeVersionUnsupported,
		resign(func(m *protocol.Message) { m.Envelope.Version = "2.0" }))
	add("expired", "validated at timestamp + ttl_seconds: the message is past its TTL", "2026-05-01T13:00:00Z", protocol.CodeTimeout, enc(req))
	add("future-timestamp", "timestamp 31 s after now: more than the 30 s of tolerated drift", "2026-05-01T11:59:29Z", protocol.CodePayloadInvalid, enc(req))
	tampered := req.Clone()
	tampered.Message.Payload = json.RawMessage(`{"task":"summarise the Q4 report","priority":2,"deadline":"2026-05-01T13:00:00Z"}`)
	add("tampered-payload", "the payload was changed after signing", vectorNow, protocol.CodeIdentityInvalid, enc(tampered))
	wrongKey := req.Clone()
	if err := protocol.Sign(wrongKey, keyFromSeed(t, otherSeed)); err != nil {
		t.Fatal(err)
	}
	wrongKey.Envelope.Sender.PeerID = req.Envelope.Sender.PeerID
	add("wrong-key", "signed by the second key, but sender.peer_id names the first", vectorNow, protocol.CodeIdentityInvalid, enc(wrongKey))
	unsigned := req.Clone()
	unsigned.Envelope.Sender.IdentitySig = ""
	add("missing-signature", "sender.identity_sig is absent", vectorNow, protocol.CodeIdentityInvalid, enc(unsigned))
	add("unknown-channel", "recipient.channel is neither one of the five standard channels nor x- custom", vectorNow, protocol.CodeChannelUnknown,
		resign(func(m *protocol.Message) { m.Envelope.Recipient.Channel = "billing" }))
	add("wildcard-sender", "wildcards are allowed in recipients only", vectorNow, protocol.CodePayloadInvalid,
		resign(func(m *protocol.Message) { m.Envelope.Sender.AgentID = "*:*:planner" }))
	add("agent-id-65-chars", "an agent id of 65 characters (the limit is 64)", vectorNow, protocol.CodePayloadInvalid,
		resign(func(m *protocol.Message) { m.Envelope.Recipient.AgentID = "acme:host-2:" + strings.Repeat("a", 53) }))
	add("bad-message-id", "message_id is not a UUID", vectorNow, protocol.CodePayloadInvalid,
		resign(func(m *protocol.Message) { m.Envelope.MessageID = "42" }))
	add("payload-nesting-11", "the payload is nested 11 levels deep (the limit is 10)", vectorNow, protocol.CodePayloadInvalid,
		resign(func(m *protocol.Message) {
			m.Message.Payload = json.RawMessage(strings.Repeat(`{"a":`, 10) + `{}` + strings.Repeat(`}`, 10))
		}))
	add("heartbeat-with-query", "intent query makes no sense with type heartbeat", vectorNow, protocol.CodePayloadInvalid,
		resign(func(m *protocol.Message) {
			m.Message.Type, m.Message.Intent = protocol.TypeHeartbeat, protocol.IntentQuery
			m.Message.Payload = json.RawMessage(`{"status":"alive"}`)
		}))
	beyond := bytes.Replace(resign(func(m *protocol.Message) {
		m.Message.Payload = json.RawMessage(`{"task":"summarise the Q3 report","priority":2,"budget_cents":9007199254740992}`)
	}), []byte(`9007199254740992`), []byte(`9007199254740993`), 1)
	add("number-beyond-double", "an integer above 2^53 that no IEEE 754 double holds: RFC 8785 would sign it as 9007199254740992, so a relay "+
		"could rewrite it without breaking the signature; refused at decoding (send such numbers as strings)", vectorNow, protocol.CodePayloadInvalid, beyond)
	dup := bytes.Replace(enc(req), []byte(`"priority":2`), []byte(`"priority":2,"priority":9`), 1)
	add("duplicate-member", "a member name appears twice in one object (not I-JSON: refused at decoding)", vectorNow, protocol.CodePayloadInvalid, dup)
	return out
}

// checkVector runs a receiver's checks in order: decode, signature, validation.
func checkVector(doc []byte, now string) error {
	at, err := time.Parse(time.RFC3339, now)
	if err != nil {
		return err
	}
	m, err := protocol.Decode(doc)
	if err != nil {
		return err
	}
	if err := protocol.Verify(m); err != nil {
		return err
	}
	return protocol.Validate(m, at, len(doc), protocol.Limits{})
}

func indent(t testing.TB, doc []byte) []byte {
	var b bytes.Buffer
	if err := json.Indent(&b, doc, "", "  "); err != nil {
		t.Fatal(err)
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// generateVectors returns every file of docs/test-vectors that the generator owns, by path
// relative to vectorDir.
func generateVectors(t testing.TB) map[string][]byte {
	files := map[string][]byte{}
	man := vectorManifest{Keys: []vectorKey{describeKey(t, "first", fixedSeed), describeKey(t, "second", otherSeed)}}
	valid := vectorMessages(t)
	for _, v := range valid {
		doc, err := protocol.EncodeJSON(v.m)
		if err != nil {
			t.Fatal(err)
		}
		c := mustCanonical(t, v.m)
		sum := sha256.Sum256(c)
		docPath, canonPath := "valid/"+v.name+".json", "valid/"+v.name+".canonical"
		files[docPath] = indent(t, doc)
		files[canonPath] = c
		man.Valid = append(man.Valid, validVector{Name: v.name, Description: v.description, Document: docPath, Canonical: canonPath,
			SHA256Hex: hex.EncodeToString(sum[:]), SignatureB64: v.m.Envelope.Sender.IdentitySig,
			SignerPeerID: v.m.Envelope.Sender.PeerID, ValidateAtUTC: vectorNow})
	}
	for _, c := range vectorInvalid(t, valid) {
		p := "invalid/" + c.name + ".json"
		if c.name == "duplicate-member" {
			files[p] = append(c.doc, '\n') // json.Indent would keep it, but keep it as sent
		} else {
			files[p] = indent(t, c.doc)
		}
		man.Invalid = append(man.Invalid, invalidVector{Name: c.name, Description: c.description, Document: p, Now: c.now, Code: string(c.code)})
	}
	b, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	files["vectors.json"] = append(b, '\n')
	return files
}

// TestVectors_AreWhatTheGeneratorProduces: the committed vectors are reproducible (Ed25519
// is deterministic), so any change of behaviour shows up as a diff. Run with -update to
// rewrite them after a deliberate change.
func TestVectors_AreWhatTheGeneratorProduces(t *testing.T) {
	files := generateVectors(t)
	if *update {
		for p, b := range files {
			full := filepath.Join(vectorDir, p)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for p, want := range files {
		got, err := os.ReadFile(filepath.Join(vectorDir, p))
		if err != nil {
			t.Fatalf("%v (run go test ./protocol -run TestVectors -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the generator produces", p)
		}
	}
}

func readManifest(t *testing.T) vectorManifest {
	b, err := os.ReadFile(filepath.Join(vectorDir, "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var man vectorManifest
	if err := json.Unmarshal(b, &man); err != nil {
		t.Fatal(err)
	}
	return man
}

// TestVectors_Keys: the key bytes, the public key and the peer id agree with each other,
// using only crypto/ed25519 and the byte layouts the README describes.
func TestVectors_Keys(t *testing.T) {
	for _, k := range readManifest(t).Keys {
		seed, _ := hex.DecodeString(k.SeedHex)
		pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
		if hex.EncodeToString(pub) != k.PublicKeyHex {
			t.Errorf("%s: public key", k.Name)
		}
		// PublicKey protobuf: field 1 (Type) varint 1 = Ed25519, field 2 (Data) 32 bytes.
		if want := "08011220" + k.PublicKeyHex; k.PublicKeyProtobufHex != want {
			t.Errorf("%s: public key protobuf %s, want %s", k.Name, k.PublicKeyProtobufHex, want)
		}
		// PrivateKey protobuf: Type 1, Data 64 bytes = seed || public key.
		if want := "08011240" + k.SeedHex + k.PublicKeyHex; k.PrivateKeyProtobufHex != want {
			t.Errorf("%s: private key protobuf %s, want %s", k.Name, k.PrivateKeyProtobufHex, want)
		}
		// Identity multihash: code 0x00, length 0x24 (36), then the protobuf.
		if want := "0024" + k.PublicKeyProtobufHex; k.PeerIDMultihashHex != want {
			t.Errorf("%s: multihash %s, want %s", k.Name, k.PeerIDMultihashHex, want)
		}
		mh, _ := hex.DecodeString(k.PeerIDMultihashHex)
		if got := peer.ID(mh).String(); got != k.PeerID || !strings.HasPrefix(got, "12D3KooW") {
			t.Errorf("%s: peer id %s, want %s", k.Name, got, k.PeerID)
		}
	}
}

// TestVectors_Valid: each document's canonical form, digest and signature are the recorded
// ones, the signature verifies with plain crypto/ed25519 over the digest, and the document
// passes every check at its "now".
func TestVectors_Valid(t *testing.T) {
	man := readManifest(t)
	pubs := map[string]ed25519.PublicKey{}
	for _, k := range man.Keys {
		b, _ := hex.DecodeString(k.PublicKeyHex)
		pubs[k.PeerID] = b
	}
	for _, v := range man.Valid {
		t.Run(v.Name, func(t *testing.T) {
			doc, err := os.ReadFile(filepath.Join(vectorDir, v.Document))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(vectorDir, v.Canonical))
			if err != nil {
				t.Fatal(err)
			}
			m, err := protocol.DecodeJSON(doc)
			if err != nil {
				t.Fatal(err)
			}
			if got := mustCanonical(t, m); !bytes.Equal(got, want) {
				t.Fatalf("canonical form\n got: %s\nwant: %s", got, want)
			}
			sum := sha256.Sum256(want)
			if hex.EncodeToString(sum[:]) != v.SHA256Hex {
				t.Fatal("sha256_hex")
			}
			if m.Envelope.Sender.IdentitySig != v.SignatureB64 || m.Envelope.Sender.PeerID != v.SignerPeerID {
				t.Fatal("signature or signer in the document differ from the manifest")
			}
			sig, err := base64.StdEncoding.Strict().DecodeString(v.SignatureB64)
			if err != nil || !ed25519.Verify(pubs[v.SignerPeerID], sum[:], sig) {
				t.Fatalf("crypto/ed25519 does not verify (%v)", err)
			}
			if err := checkVector(doc, v.ValidateAtUTC); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestVectors_Invalid: each invalid document fails with its recorded code.
func TestVectors_Invalid(t *testing.T) {
	for _, v := range readManifest(t).Invalid {
		t.Run(v.Name, func(t *testing.T) {
			doc, err := os.ReadFile(filepath.Join(vectorDir, v.Document))
			if err != nil {
				t.Fatal(err)
			}
			wantCode(t, checkVector(doc, v.Now), protocol.Code(v.Code))
		})
	}
}

// TestVectors_IndependentNodeCheck recomputes every valid vector's canonical form, digest and
// signature check with node.js and nothing but its standard library (check.mjs), when node is
// installed.
func TestVectors_IndependentNodeCheck(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	out, err := exec.Command(node, filepath.Join(vectorDir, "check.mjs"), vectorDir).CombinedOutput()
	if err != nil {
		t.Fatalf("check.mjs: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("0 failed")) {
		t.Fatalf("check.mjs:\n%s", out)
	}
}
