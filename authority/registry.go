package authority

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

// maxRegistryBytes bounds the registry file read by OpenRegistry. An entry is about 300
// bytes; MaxIssued of them fit.
const maxRegistryBytes = 64 << 20

// MaxIssued bounds the unexpired certificates a registry records. Renewals replace a
// certificate at most once per third of its lifetime, so this is far more than the agents of
// any mesh will hold at once.
const MaxIssued = 100_000

// MaxPerHolder bounds the unexpired, unrevoked certificates a registry records for one agent
// id on one peer. A certificate and its successor overlap (renewal comes when a third of the
// lifetime is left), so two is the norm; the others leave room for renewals whose answer was
// lost. A renewed certificate stays valid, so without this bound its holder could have it
// renewed again and again, each time growing the registry, until MaxIssued refused everyone.
const MaxPerHolder = 4

// ErrNothingToRevoke says that no unexpired certificate matched what Revoke was asked for.
var ErrNothingToRevoke = errors.New("no unexpired certificate matches")

// ErrHolderFull says that the registry already records MaxPerHolder certificates of the agent
// on the peer.
var ErrHolderFull = errors.New("the agent on this peer holds the most certificates recorded for one holder")

// ErrHeldElsewhere says that another peer holds an unexpired, unrevoked certificate for the
// agent id: one agent id has one holder. Its operator replaces the holder on purpose
// (RecordReplacing, `iacp-node invite --agent ID --replace`) or revokes it first.
var ErrHeldElsewhere = errors.New("the agent id is held by another peer")

// Issued is one certificate the authority issued, as its registry keeps it.
type Issued struct {
	// ID is the certificate's jti.
	ID string `json:"id"`
	// AgentID and Peer are what it binds.
	AgentID string  `json:"agent_id"`
	Peer    peer.ID `json:"peer"`
	// Permissions are the permissions it grants (its "permissions" claim).
	Permissions []string `json:"permissions,omitempty"`
	// IssuedAt and Expires bound its life.
	IssuedAt time.Time `json:"issued_at"`
	Expires  time.Time `json:"expires"`
	// Revoked is when it was revoked; zero while it stands.
	Revoked time.Time `json:"revoked,omitzero"`
}

// Registry is the mesh authority's record of the certificates it issued and revoked, and of
// the revocation list's seq, kept in a JSON file of mode 0600 rewritten atomically on every
// change. Revoking needs it: a certificate is revoked by its jti, and people name agents.
// Expired certificates leave the registry at the next change. One process owns a registry;
// mu serialises its methods.
type Registry struct {
	path string
	now  func() time.Time

	mu     sync.Mutex
	issued map[string]*Issued // by certificate id
	seq    uint64             // of the last revocation list signed
}

// registryFile is the file's content.
type registryFile struct {
	Version int      `json:"version"`
	CRLSeq  uint64   `json:"crl_seq"`
	Issued  []Issued `json:"issued"`
}

// OpenRegistry opens the registry at path; a missing file is an empty registry, created at
// the first change. now is the clock (time.Now when nil).
func OpenRegistry(path string, now func() time.Time) (*Registry, error) {
	if now == nil {
		now = time.Now
	}
	r := &Registry{path: path, now: now, issued: map[string]*Issued{}}
	var file registryFile
	ok, err := readVersionedFile(path, "certificate registry", maxRegistryBytes, false, &file)
	if err != nil {
		return nil, err
	}
	if !ok {
		return r, nil
	}
	for i := range file.Issued {
		e := &file.Issued[i]
		if e.ID == "" || r.issued[e.ID] != nil {
			return nil, fmt.Errorf("certificate registry %s is damaged: entry %d has no id or a repeated one", path, i)
		}
		r.issued[e.ID] = e
	}
	r.seq = file.CRLSeq
	return r, nil
}

// Record adds a certificate the authority issued. It refuses when MaxIssued unexpired
// certificates are recorded; (PERMISSION_DENIED, ErrHeldElsewhere) when another peer holds
// an unexpired, unrevoked certificate for the same agent id; and (PERMISSION_DENIED,
// ErrHolderFull) when MaxPerHolder unexpired, unrevoked ones of the same agent id on the same
// peer are.
func (r *Registry) Record(c *Certificate) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := r.pruned(r.now())
	if err := r.admit(next, c); err != nil {
		return err
	}
	return r.commit(next, r.seq)
}

// RecordReplacing records c, whose peer replaces every other peer holding c's agent id: their
// unexpired certificates are revoked at once, and the next revocation list, signed with a,
// lists them. It returns that list and the certificates it revoked ("" and none when no other
// peer held the id, which is then Record). The operator asks for it by inviting with
// --replace, for an agent that moves to a new key.
func (r *Registry) RecordReplacing(a *Authority, c *Certificate) (crl string, revoked []Issued, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now().UTC()
	next := r.pruned(now)
	for id, e := range next {
		if e.AgentID == c.AgentID && e.Peer != c.Peer && e.Revoked.IsZero() {
			gone := *e
			gone.Revoked = now
			next[id] = &gone
			revoked = append(revoked, gone)
		}
	}
	if err := r.admit(next, c); err != nil {
		return "", nil, err
	}
	seq := r.seq
	if len(revoked) > 0 {
		seq++
		if crl, err = a.RevocationList(seq, revokedIn(next)); err != nil {
			return "", nil, err
		}
	}
	if err := r.commit(next, seq); err != nil {
		return "", nil, err
	}
	sortIssued(revoked)
	return crl, revoked, nil
}

// Holders returns the unexpired, unrevoked certificates of agentID on peers other than p: what
// Record would refuse a certificate of agentID on p for.
func (r *Registry) Holders(agentID string, p peer.ID) []Issued {
	r.mu.Lock()
	defer r.mu.Unlock()
	return heldElsewhere(r.pruned(r.now()), agentID, p)
}

// admit checks c against the bounds and the one-holder rule in next, and adds it.
func (r *Registry) admit(next map[string]*Issued, c *Certificate) error {
	if len(next) >= MaxIssued {
		return fmt.Errorf("certificate registry: %d unexpired certificates recorded, the most it holds", len(next))
	}
	if others := heldElsewhere(next, c.AgentID, c.Peer); len(others) > 0 {
		o := others[0]
		return protocol.Errorf(protocol.CodePermissionDenied, "certificate registry: %w: %s is held by peer %s (certificate %s, expires %s); choose another agent id, or have the mesh's operator replace the holder (iacp-node invite --agent %s --replace) or revoke it",
			ErrHeldElsewhere, c.AgentID, o.Peer, o.ID, fmtTime(o.Expires), c.AgentID)
	}
	held := 0
	for _, e := range next {
		if e.AgentID == c.AgentID && e.Peer == c.Peer && e.Revoked.IsZero() {
			held++
		}
	}
	if held >= MaxPerHolder {
		return protocol.Errorf(protocol.CodePermissionDenied, "certificate registry: %w: %s on %s holds %d unexpired certificates (renew the newest one)", ErrHolderFull, c.AgentID, c.Peer, held)
	}
	next[c.ID] = &Issued{ID: c.ID, AgentID: c.AgentID, Peer: c.Peer, Permissions: slices.Clone(c.Permissions),
		IssuedAt: c.IssuedAt, Expires: c.Expires}
	return nil
}

// heldElsewhere returns the unrevoked certificates of agentID in entries on peers other than
// p, by issue time.
func heldElsewhere(entries map[string]*Issued, agentID string, p peer.ID) []Issued {
	var out []Issued
	for _, e := range entries {
		if e.AgentID == agentID && e.Peer != p && e.Revoked.IsZero() {
			out = append(out, *e)
		}
	}
	sortIssued(out)
	return out
}

// revokedIn lists the revoked certificates of entries, as a revocation list names them.
func revokedIn(entries map[string]*Issued) []Revoked {
	var list []Revoked
	for _, e := range entries {
		if !e.Revoked.IsZero() {
			list = append(list, Revoked{ID: e.ID, AgentID: e.AgentID, Expires: e.Expires})
		}
	}
	slices.SortFunc(list, func(x, y Revoked) int { return strings.Compare(x.ID, y.ID) })
	return list
}

// Revoke revokes every unexpired certificate that target names: a certificate id, or an agent
// id (all of that agent's certificates). It signs with a the next revocation list, which
// lists every revoked certificate that has not expired, records it, and returns the list and
// the certificates it revoked now. Nothing matching is ErrNothingToRevoke; a certificate
// revoked before is listed again, not an error.
func (r *Registry) Revoke(a *Authority, target string) (crl string, revoked []Issued, err error) {
	if target == "" {
		return "", nil, errors.New("revoke: name an agent id or a certificate id")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now().UTC()
	next := r.pruned(now)
	for id, e := range next {
		if id != target && e.AgentID != target {
			continue
		}
		if e.Revoked.IsZero() {
			c := *e
			c.Revoked = now
			next[id] = &c
		}
		revoked = append(revoked, *next[id])
	}
	if len(revoked) == 0 {
		return "", nil, protocol.Errorf(protocol.CodeAgentNotFound, "revoke %s: %w (see the certificates with iacp-node trust certs)", target, ErrNothingToRevoke)
	}
	crl, err = a.RevocationList(r.seq+1, revokedIn(next))
	if err != nil {
		return "", nil, err
	}
	if err := r.commit(next, r.seq+1); err != nil {
		return "", nil, err
	}
	sortIssued(revoked)
	return crl, revoked, nil
}

// Matching returns the unexpired certificates, revoked or not, that Revoke(target) would
// name: the one with id target, or every one of agent id target.
func (r *Registry) Matching(target string) []Issued {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	var out []Issued
	for id, e := range r.issued {
		if (id == target || e.AgentID == target) && now.Before(e.Expires) {
			out = append(out, *e)
		}
	}
	sortIssued(out)
	return out
}

// Find returns the unexpired certificate with id, if recorded.
func (r *Registry) Find(id string) (Issued, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.issued[id]
	if !ok || !r.now().Before(e.Expires) {
		return Issued{}, false
	}
	return *e, true
}

// List returns the unexpired certificates recorded, by agent id then issue time.
func (r *Registry) List() []Issued {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	out := make([]Issued, 0, len(r.issued))
	for _, e := range r.issued {
		if now.Before(e.Expires) {
			out = append(out, *e)
		}
	}
	sortIssued(out)
	return out
}

// CRLSeq returns the seq of the last revocation list Revoke signed, 0 if none.
func (r *Registry) CRLSeq() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seq
}

func sortIssued(s []Issued) {
	slices.SortFunc(s, func(x, y Issued) int {
		if c := strings.Compare(x.AgentID, y.AgentID); c != 0 {
			return c
		}
		if c := x.IssuedAt.Compare(y.IssuedAt); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
}

// pruned returns a copy of the entries without those that expired by now.
func (r *Registry) pruned(now time.Time) map[string]*Issued {
	return unexpired(r.issued, now, func(e *Issued) time.Time { return e.Expires })
}

// commit writes entries and seq to the file and, once that succeeded, makes them the
// registry's.
func (r *Registry) commit(entries map[string]*Issued, seq uint64) error {
	file := registryFile{Version: 1, CRLSeq: seq, Issued: make([]Issued, 0, len(entries))}
	for _, e := range entries {
		file.Issued = append(file.Issued, *e)
	}
	sortIssued(file.Issued)
	if err := writeJSONFile(r.path, "certificate registry", file); err != nil {
		return err
	}
	r.issued, r.seq = entries, seq
	return nil
}
