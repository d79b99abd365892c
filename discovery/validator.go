package discovery

import (
	"fmt"
	"time"

	record "github.com/libp2p/go-libp2p-record"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Validator is the DHT record validator of one agent-record namespace (AgentNamespace or
// PeerNamespace). It refuses a value unless it decodes (DecodeRecord: at most MaxRecordBytes,
// well formed, signed by the Ed25519 key embedded in the peer id it names), names the key it is
// stored under, has not expired, does not expire more than MaxRecordLifetime (plus ClockSkew)
// from now, and its Seq (unix ns) lies at most ClockSkew in the future. With a CertCheck
// (authority mode) it also refuses a record, Left or not, that carries no certificate or whose
// certificate CertCheck refuses. Select applies the owner rule (see Select).
type Validator struct {
	// Namespace is AgentNamespace or PeerNamespace.
	Namespace string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// CertCheck, when set, verifies a record's certificate: it returns nil only if cert is
	// valid and binds agentID to peer p. Nil is open mode: no certificate is required, and one
	// present is neither checked nor ranked.
	CertCheck func(cert string, agentID string, p peer.ID) error
	// Self is the local peer, if any: in open mode its own records win Select against another
	// peer's (see Select), so records planted on a node for its own agent never block its
	// publishes.
	Self peer.ID
}

var _ record.Validator = Validator{}

func (v Validator) now() time.Time {
	if v.Now == nil {
		return time.Now()
	}
	return v.Now()
}

// Validate implements record.Validator.
func (v Validator) Validate(key string, value []byte) error {
	_, err := v.check(key, value)
	return err
}

func (v Validator) check(key string, value []byte) (Record, error) {
	ns, rest, err := record.SplitKey(key)
	if err != nil {
		return Record{}, fmt.Errorf("agent record key %q: %w", key, err)
	}
	if ns != v.Namespace {
		return Record{}, fmt.Errorf("agent record key %q is outside namespace %q", key, v.Namespace)
	}
	r, err := DecodeRecord(value)
	if err != nil {
		return Record{}, err
	}
	switch v.Namespace {
	case AgentNamespace:
		if rest != r.AgentID {
			return Record{}, fmt.Errorf("record of agent %q stored under key %q", r.AgentID, key)
		}
	case PeerNamespace:
		id, err := peer.Decode(rest)
		if err != nil || id != r.PeerID {
			return Record{}, fmt.Errorf("record of peer %s stored under key %q", r.PeerID, key)
		}
	default:
		return Record{}, fmt.Errorf("validator namespace %q is not an agent-record namespace", v.Namespace)
	}
	now := v.now()
	if limit := now.Add(ClockSkew).UnixNano(); limit < 0 || r.Seq > uint64(limit) {
		return Record{}, fmt.Errorf("record of agent %s has seq %d, more than %s ahead of this node's clock (%d): a seq is the publisher's unix time in nanoseconds", r.AgentID, r.Seq, ClockSkew, now.UnixNano())
	}
	if !r.Expires.After(now) {
		return Record{}, fmt.Errorf("record of agent %s expired at %s", r.AgentID, r.Expires.UTC().Format(time.RFC3339))
	}
	if r.Expires.After(now.Add(MaxRecordLifetime + ClockSkew)) {
		return Record{}, fmt.Errorf("record of agent %s expires at %s, more than %s from now", r.AgentID, r.Expires.UTC().Format(time.RFC3339), MaxRecordLifetime)
	}
	if v.CertCheck != nil {
		if r.Cert == "" {
			return Record{}, fmt.Errorf("record of agent %s signed by %s carries no certificate; this mesh requires one that binds the agent to its peer", r.AgentID, r.PeerID)
		}
		if err := v.CertCheck(r.Cert, r.AgentID, r.PeerID); err != nil {
			return Record{}, fmt.Errorf("record of agent %s signed by %s: certificate refused: %w", r.AgentID, r.PeerID, err)
		}
	}
	return r, nil
}

// Select implements record.Validator. Values that Validate would refuse under key are never
// selected; among the others it folds from the first: a later value r takes the place of the
// best so far b when
//   - r and b are signed by the same peer, or the validator has a CertCheck (every value left
//     carries a certificate binding its agent to its signer, and CertCheck, asked again once
//     every value was checked, refuses a signer that another value's certificate showed is
//     not the agent id's holder): r.Seq > b.Seq, so the first of equals stays;
//   - otherwise (open mode, two peers claim one agent and neither can prove it): a live record
//     beats a Left one; between two live or two Left records, r wins if it is signed by Self,
//     or if b is not and r comes later.
//
// kad-dht calls Select with two values: [incoming, stored] when a store (a PUT_VALUE, or the
// local PutValue) decides whether to replace what it holds, so in open mode a stored record is
// replaced only by its own signer's newer one, never by another peer's (but for a live record
// over a Left one); and [best so far, next answer] when GetValue collects answers, so a
// tombstone of another peer never hides a live record, and two peers' live claims resolve to
// the local node's own, else to the later answer. See docs/discovery.md, "Who may replace a
// record".
func (v Validator) Select(key string, values [][]byte) (int, error) {
	recs := make([]*Record, len(values))
	for i, val := range values {
		if r, err := v.check(key, val); err == nil {
			recs[i] = &r
		}
	}
	if v.CertCheck != nil {
		// A later value's certificate may hold the agent id before an earlier one's (the
		// CertCheck of authority mode keeps one holder per id): the earlier is refused now.
		for i, r := range recs {
			if r != nil && v.CertCheck(r.Cert, r.AgentID, r.PeerID) != nil {
				recs[i] = nil
			}
		}
	}
	best := -1
	var b Record
	for i, r := range recs {
		if r != nil && (best < 0 || v.replaces(*r, b)) {
			best, b = i, *r
		}
	}
	if best < 0 {
		return 0, fmt.Errorf("no valid agent record among %d values for %q", len(values), key)
	}
	return best, nil
}

// replaces reports whether r, a valid value later in Select's list than b, the best so far,
// takes b's place. The directory cache decides with it too (admit): a cached record stays
// against an incoming one when replaces(cached, incoming), as a store keeps what it holds.
func (v Validator) replaces(r, b Record) bool {
	switch {
	case r.PeerID == b.PeerID || v.CertCheck != nil:
		return r.Seq > b.Seq
	case r.Left != b.Left:
		return !r.Left
	}
	return r.PeerID == v.Self || b.PeerID != v.Self
}
