package authority

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/iacp-node/iacp-node/protocol"
)

// Revocation list bounds.
const (
	// MaxCRLBytes bounds a signed revocation list; ApplyRevocations refuses a larger one.
	MaxCRLBytes = 1 << 20
	// MaxRevoked bounds the entries of one revocation list. An entry is about 90 bytes, so
	// 10,000 fit in MaxCRLBytes; expired entries leave the list, so only revoked certificates
	// that are still valid count.
	MaxRevoked = 10_000
	// revocationGrace is how long after a certificate's exp RevocationList keeps its entry:
	// long enough for any verifier's clock skew, so that no clock sees the certificate
	// valid and unrevoked.
	revocationGrace = time.Hour
)

// Revoked is one revoked certificate.
type Revoked struct {
	// ID is the certificate's jti.
	ID string
	// AgentID is the certificate's sub, for people reading the list.
	AgentID string
	// Expires is the certificate's exp: after it (and an hour's grace for clock skew) the
	// entry is dropped from new lists, as the certificate is refused anyway. Zero keeps the
	// entry for ever.
	Expires time.Time
}

// crlClaims are the claims of a revocation list.
type crlClaims struct {
	jwt.RegisteredClaims
	Seq     uint64     `json:"seq"`
	Revoked []crlEntry `json:"revoked"`
}

// crlEntry is one entry of a revocation list.
type crlEntry struct {
	JTI string           `json:"jti"`
	Sub string           `json:"sub,omitempty"`
	Exp *jwt.NumericDate `json:"exp,omitempty"`
}

// RevocationList signs revocation list number seq (from 1; each new list needs a higher one)
// revoking the given certificates. Entries whose certificate expired more than an hour ago
// are left out; more than MaxRevoked remaining entries, or an entry without ID, are refused.
func (a *Authority) RevocationList(seq uint64, revoked []Revoked) (string, error) {
	if seq == 0 {
		return "", fmt.Errorf("authority: revocation list seq must be at least 1")
	}
	now := a.now().UTC().Truncate(time.Second)
	entries := make([]crlEntry, 0, len(revoked))
	for i, r := range revoked {
		if r.ID == "" {
			return "", fmt.Errorf("authority: revocation list entry %d has no certificate id", i)
		}
		e := crlEntry{JTI: r.ID, Sub: r.AgentID}
		if !r.Expires.IsZero() {
			if r.Expires.Add(revocationGrace).Before(now) {
				continue
			}
			e.Exp = jwt.NewNumericDate(r.Expires)
		}
		entries = append(entries, e)
	}
	if len(entries) > MaxRevoked {
		return "", fmt.Errorf("authority: revocation list has %d unexpired entries, more than MaxRevoked (%d)", len(entries), MaxRevoked)
	}
	raw, err := a.sign(typCRL, &crlClaims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: a.id, IssuedAt: jwt.NewNumericDate(now)},
		Seq:              seq, Revoked: entries,
	})
	if err != nil {
		return "", err
	}
	if len(raw) > MaxCRLBytes {
		return "", fmt.Errorf("authority: revocation list would be %d bytes, more than MaxCRLBytes (%d)", len(raw), MaxCRLBytes)
	}
	return raw, nil
}

// crlError is a refused revocation list.
func crlError(format string, args ...any) error {
	return protocol.Errorf(protocol.CodeIdentityInvalid, "revocation list: "+format, args...)
}

// ApplyRevocations verifies the signed revocation list raw and, when its seq is higher than
// that of the list in force, makes it the list in force (changed is true). A list with a
// lower or equal seq changes nothing and is no error: lists travel by gossip and arrive out
// of order. Once a list is in force, a list whose seq (read before anything is verified) is
// not higher is dropped unverified, as it could change nothing: anyone may replay old lists,
// and each would otherwise cost a signature check and the decoding of up to MaxRevoked
// entries. A refused list is a *protocol.Error with CodeIdentityInvalid.
func (v *Verifier) ApplyRevocations(raw string) (changed bool, err error) {
	if len(raw) > MaxCRLBytes {
		return false, crlError("%d bytes, more than %d", len(raw), MaxCRLBytes)
	}
	if v.stale(raw) {
		return false, nil
	}
	var c crlClaims
	if err := verifyJWS(raw, &c, exactTyp(typCRL), v.meshKeyFor); err != nil {
		if err.stage == stageSignature {
			err.msg = "not signed by the mesh authority " + v.meshID
		}
		return false, crlError("%s", err.msg)
	}
	if c.Issuer != v.meshID {
		return false, crlError("iss %q is not the mesh id %s", c.Issuer, v.meshID)
	}
	iat, ok := timeOf(c.IssuedAt)
	now := v.now()
	if !ok {
		return false, crlError("seq %d: iat is required", c.Seq)
	}
	if iat.After(now.Add(v.skew)) {
		return false, crlError("seq %d: issued at %s, in the future (now %s, skew %v)", c.Seq, fmtTime(iat), fmtTime(now), v.skew)
	}
	if len(c.Revoked) > MaxRevoked {
		return false, crlError("seq %d: %d entries, more than %d", c.Seq, len(c.Revoked), MaxRevoked)
	}
	set := make(map[string]struct{}, len(c.Revoked))
	for i, e := range c.Revoked {
		if e.JTI == "" {
			return false, crlError("seq %d: entry %d has no jti", c.Seq, i)
		}
		set[e.JTI] = struct{}{}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if c.Seq <= v.crlSeq {
		return false, nil
	}
	v.crlRaw, v.crlSeq, v.revoked = raw, c.Seq, set
	return true, nil
}

// stale reports whether a list is in force and raw, read without verifying it, claims a seq
// that is not higher: the list in force again, or an older one. It reads the seq from the
// start of the claims alone (RevocationList writes it before the entries), so its cost does
// not grow with the list. Anything it cannot read so is not stale, and goes on to be verified
// (and refused).
func (v *Verifier) stale(raw string) bool {
	v.mu.RLock()
	seq, same := v.crlSeq, raw == v.crlRaw
	v.mu.RUnlock()
	if seq == 0 {
		return false
	}
	if same {
		return true
	}
	_, rest, ok := strings.Cut(raw, ".")
	payload, _, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return false
	}
	got, ok := leadingSeq(payload)
	return ok && got <= seq
}

// staleScan is how much of a list's encoded claims stale reads: its registered claims and
// seq, never its entries.
const staleScan = 1 << 10

// leadingSeq returns the top-level "seq" of the base64url JSON claims payload when it comes
// within the first staleScan characters.
func leadingSeq(payload string) (uint64, bool) {
	if len(payload) > staleScan {
		payload = payload[:staleScan] // a multiple of 4: whole bytes
	}
	b, err := b64.DecodeString(payload)
	if err != nil {
		return 0, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return 0, false
		}
		if key == "seq" {
			var seq uint64
			return seq, dec.Decode(&seq) == nil
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return 0, false
		}
	}
	return 0, false
}

// Revoked reports whether the revocation list in force revokes the certificate with id jti.
func (v *Verifier) Revoked(jti string) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	_, ok := v.revoked[jti]
	return ok
}

// RevocationSeq returns the seq of the revocation list in force, 0 if none.
func (v *Verifier) RevocationSeq() uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.crlSeq
}

// CurrentRevocations returns the signed revocation list in force, "" if none, so that a node
// can persist it and serve it to peers.
func (v *Verifier) CurrentRevocations() string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.crlRaw
}
