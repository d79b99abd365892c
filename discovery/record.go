package discovery

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// RecordVersion is the version of the agent record format this package writes and reads.
const RecordVersion = 1

// MaxRecordBytes bounds an encoded signed record (64 KiB): larger values are refused by the
// validator, so nobody can fill the DHT's stores with huge manifests.
const MaxRecordBytes = 64 << 10

// MaxRecordAddrs bounds the number of addresses a record may carry.
const MaxRecordAddrs = 32

// MaxRecordLifetime is the longest a record may claim to live: a record whose expiry lies
// further than this (plus ClockSkew) in the future is refused, so no record is immortal.
const MaxRecordLifetime = 24 * time.Hour

// MaxCertBytes bounds a record's certificate (8 KiB): SignRecord and DecodeRecord refuse a
// longer one.
const MaxCertBytes = 8 << 10

// ClockSkew is the drift tolerated between the publisher's clock and the validator's (the
// specification's 30 s). The validator also refuses a record whose Seq lies more than this in
// the future of its clock.
const ClockSkew = 30 * time.Second

// signaturePrefix is prepended to the canonical record body before signing, so that a record
// signature can never be replayed as the signature of anything else (an IACP envelope, say).
const signaturePrefix = "iacp-agent-record/v1\n"

// Record is an agent record: a signed statement by the peer PeerID that it hosts the agent
// AgentID, reachable at Addrs, with the capabilities of Manifest. It is stored in the DHT under
// AgentKey(AgentID) and PeerKey(PeerID).
type Record struct {
	// AgentID is the agent's IACP id (namespace:host:name).
	AgentID string
	// PeerID is the libp2p peer that hosts the agent and signed the record.
	PeerID peer.ID
	// Addrs are the peer's addresses when the record was published.
	Addrs []ma.Multiaddr
	// Manifest is the agent's capability manifest; zero in a Left record.
	Manifest protocol.Manifest
	// Seq orders records of one agent: the highest wins. It is the publisher's unix time in
	// nanoseconds, so it grows across restarts without any storage.
	Seq uint64
	// Expires is when the record stops being valid.
	Expires time.Time
	// Left says the agent left the mesh (a clean shutdown): the record is a tombstone.
	Left bool
	// Cert is the agent certificate that binds AgentID to PeerID (a compact JWS issued by the
	// mesh's authority; its format is defined elsewhere and opaque here), at most MaxCertBytes;
	// empty when the node has none. It is signed with the rest of the record. A Validator with
	// a CertCheck requires it; one without ignores it.
	Cert string
}

// AddrInfo returns the peer id and addresses, ready for host.Connect.
func (r Record) AddrInfo() peer.AddrInfo {
	return peer.AddrInfo{ID: r.PeerID, Addrs: r.Addrs}
}

// recordBody is the wire form of the signed part of a record (docs/discovery.md).
type recordBody struct {
	V        int                `json:"v"`
	AgentID  string             `json:"agent_id"`
	PeerID   string             `json:"peer_id"`
	Addrs    []string           `json:"addrs"`
	Manifest *protocol.Manifest `json:"manifest,omitempty"`
	Seq      uint64             `json:"seq,string"`
	Expires  int64              `json:"expires_unix_ms"`
	Left     bool               `json:"left,omitempty"`
	Cert     string             `json:"cert,omitempty"`
}

// signedRecord is the value stored in the DHT: the canonical body and its signature.
type signedRecord struct {
	Record json.RawMessage `json:"record"`
	Sig    string          `json:"sig"`
}

// signingBytes returns the exact bytes the Ed25519 signature covers.
func signingBytes(canonicalBody []byte) []byte {
	b := make([]byte, 0, len(signaturePrefix)+len(canonicalBody))
	b = append(b, signaturePrefix...)
	return append(b, canonicalBody...)
}

// SignRecord encodes r and signs it with key, which must be the Ed25519 key of r.PeerID.
// It returns the value to store in the DHT.
func SignRecord(r Record, key crypto.PrivKey) ([]byte, error) {
	if key == nil || key.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("sign agent record: the key must be Ed25519 (IACP identities are Ed25519)")
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("sign agent record: peer id of key: %w", err)
	}
	if id != r.PeerID {
		return nil, fmt.Errorf("sign agent record: key belongs to %s but the record names %s; sign with the host's own key", id, r.PeerID)
	}
	if len(r.Cert) > MaxCertBytes {
		return nil, fmt.Errorf("sign agent record: the certificate is %d bytes; at most %d are allowed", len(r.Cert), MaxCertBytes)
	}
	body := recordBody{
		V: RecordVersion, AgentID: r.AgentID, PeerID: r.PeerID.String(),
		Addrs: make([]string, 0, len(r.Addrs)), Seq: r.Seq, Expires: r.Expires.UnixMilli(), Left: r.Left,
		Cert: r.Cert,
	}
	for _, a := range r.Addrs {
		body.Addrs = append(body.Addrs, a.String())
	}
	if !r.Left {
		m := r.Manifest
		body.Manifest = &m
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("sign agent record: encode: %w", err)
	}
	canon, err := protocol.CanonicalJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("sign agent record: canonicalise: %w", err)
	}
	sig, err := key.Sign(signingBytes(canon))
	if err != nil {
		return nil, fmt.Errorf("sign agent record: %w", err)
	}
	out, err := json.Marshal(signedRecord{Record: canon, Sig: base64.StdEncoding.EncodeToString(sig)})
	if err != nil {
		return nil, fmt.Errorf("sign agent record: encode: %w", err)
	}
	if len(out) > MaxRecordBytes {
		return nil, fmt.Errorf("agent record is %d bytes; at most %d are allowed: shorten the manifest or the address list", len(out), MaxRecordBytes)
	}
	return out, nil
}

// DecodeRecord parses and verifies a signed record: size, syntax, version, agent id, peer id
// (Ed25519), addresses, manifest agent id, certificate size and signature. It does not check
// the expiry or the seq, which depend on the clock, nor the certificate (see Validator).
func DecodeRecord(value []byte) (Record, error) {
	if len(value) > MaxRecordBytes {
		return Record{}, fmt.Errorf("agent record is %d bytes; at most %d are allowed", len(value), MaxRecordBytes)
	}
	var sr signedRecord
	if err := json.Unmarshal(value, &sr); err != nil {
		return Record{}, fmt.Errorf("agent record is not JSON of the form {\"record\":{...},\"sig\":\"...\"}: %w", err)
	}
	if len(sr.Record) == 0 || sr.Sig == "" {
		return Record{}, fmt.Errorf("agent record lacks its record or sig member")
	}
	var body recordBody
	dec := json.NewDecoder(bytes.NewReader(sr.Record))
	if err := dec.Decode(&body); err != nil {
		return Record{}, fmt.Errorf("agent record body: %w", err)
	}
	if body.V != RecordVersion {
		return Record{}, fmt.Errorf("agent record version %d is not supported (this node reads version %d)", body.V, RecordVersion)
	}
	if err := protocol.ValidateAgentID(body.AgentID); err != nil {
		return Record{}, fmt.Errorf("agent record: %w", err)
	}
	id, err := peer.Decode(body.PeerID)
	if err != nil {
		return Record{}, fmt.Errorf("agent record: peer_id %q: %w", body.PeerID, err)
	}
	pub, err := id.ExtractPublicKey()
	if err != nil || pub.Type() != crypto.Ed25519 {
		return Record{}, fmt.Errorf("agent record: peer_id %s does not embed an Ed25519 key", id)
	}
	if len(body.Addrs) > MaxRecordAddrs {
		return Record{}, fmt.Errorf("agent record carries %d addresses; at most %d are allowed", len(body.Addrs), MaxRecordAddrs)
	}
	if len(body.Cert) > MaxCertBytes {
		return Record{}, fmt.Errorf("agent record: the certificate is %d bytes; at most %d are allowed", len(body.Cert), MaxCertBytes)
	}
	r := Record{AgentID: body.AgentID, PeerID: id, Seq: body.Seq, Expires: time.UnixMilli(body.Expires), Left: body.Left, Cert: body.Cert}
	for _, s := range body.Addrs {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return Record{}, fmt.Errorf("agent record: address %q: %w", s, err)
		}
		r.Addrs = append(r.Addrs, a)
	}
	switch {
	case body.Left && body.Manifest != nil:
		return Record{}, fmt.Errorf("agent record: a left record carries no manifest")
	case !body.Left && body.Manifest == nil:
		return Record{}, fmt.Errorf("agent record: manifest is missing")
	case body.Manifest != nil:
		if body.Manifest.AgentID != body.AgentID {
			return Record{}, fmt.Errorf("agent record: manifest agent_id %q differs from the record's %q", body.Manifest.AgentID, body.AgentID)
		}
		r.Manifest = *body.Manifest
	}
	sig, err := base64.StdEncoding.DecodeString(sr.Sig)
	if err != nil {
		return Record{}, fmt.Errorf("agent record: sig is not base64: %w", err)
	}
	canon, err := protocol.CanonicalJSON(sr.Record)
	if err != nil {
		return Record{}, fmt.Errorf("agent record: canonicalise: %w", err)
	}
	ok, err := pub.Verify(signingBytes(canon), sig)
	if err != nil || !ok {
		return Record{}, fmt.Errorf("agent record for %s: signature does not verify for peer %s", body.AgentID, id)
	}
	return r, nil
}
