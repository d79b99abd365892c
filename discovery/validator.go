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
// stored under, has not expired and does not expire more than MaxRecordLifetime (plus ClockSkew)
// from now. Select picks the highest Seq.
type Validator struct {
	// Namespace is AgentNamespace or PeerNamespace.
	Namespace string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
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
	if !r.Expires.After(now) {
		return Record{}, fmt.Errorf("record of agent %s expired at %s", r.AgentID, r.Expires.UTC().Format(time.RFC3339))
	}
	if r.Expires.After(now.Add(MaxRecordLifetime + ClockSkew)) {
		return Record{}, fmt.Errorf("record of agent %s expires at %s, more than %s from now", r.AgentID, r.Expires.UTC().Format(time.RFC3339), MaxRecordLifetime)
	}
	return r, nil
}

// Select implements record.Validator: the index of the valid value with the highest Seq; the
// first of equals wins. Values that do not decode are never selected.
func (v Validator) Select(key string, values [][]byte) (int, error) {
	best, bestSeq := -1, uint64(0)
	for i, val := range values {
		r, err := DecodeRecord(val)
		if err != nil {
			continue
		}
		if best < 0 || r.Seq > bestSeq {
			best, bestSeq = i, r.Seq
		}
	}
	if best < 0 {
		return 0, fmt.Errorf("no valid agent record among %d values for %q", len(values), key)
	}
	return best, nil
}
