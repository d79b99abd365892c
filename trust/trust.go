package trust

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/discovery"
	"github.com/iacp-node/iacp-node/internal/quietlog"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
)

// Modes, as Trust.Mode reports them.
const (
	// Authority lets only peers holding an agent certificate of the mesh authority speak for
	// an agent id.
	Authority = "authority"
	// Open pins each agent id to the first peer whose message for it the node accepts.
	Open = "open"
	// Allowlist lets only the allowlist file's pairs speak.
	Allowlist = "allowlist"
)

// Where a claim on an agent id came from (Conflict.Source; the source Claim is given).
const (
	// SourceMessage is a direct message, or a group request from gossip.
	SourceMessage = "message"
	// SourceHeartbeat is a heartbeat.
	SourceHeartbeat = "heartbeat"
	// SourceCertificate is a second certified peer for an agent id (authority mode).
	SourceCertificate = "certificate"
)

// Config is what a Trust is built from: the node's settings that concern trust, and what it
// needs of the node. Zero values take the defaults named.
type Config struct {
	// Host serves the certificate, join and authority protocols, and fetches certificates.
	Host host.Host
	// Mode is Authority, Open, or "" to choose: Authority when an authority is configured
	// or the data directory holds its key, else Open. An allowlist turns Open into Allowlist.
	Mode string
	// AgentID is the node's agent, and Capabilities what it offers (a founder certifies
	// itself with them).
	AgentID      string
	Capabilities []string
	// DataDir holds the pins, the certificate, the revocation list and, on the authority's
	// node, its key, invitations and registry; "" keeps what it can in memory.
	DataDir string
	// Authority is the mesh id; Certificate this node's certificate ("" reads DataDir's);
	// MeshAuthority the authority's key, on its node; AuthorityNode the authority node's peer
	// id, asked for renewals and tokens (else each of Bootstrap in turn).
	Authority     string
	Certificate   string
	MeshAuthority *authority.Authority
	AuthorityNode string
	Bootstrap     []peer.ID
	// TokenIssuers are further A2ACP token issuers (peer ids); IntentPolicy the capabilities
	// each intent requires (docs/trust.md, "Authorization").
	TokenIssuers []string
	IntentPolicy map[string][]string
	// AllowlistFile, MaxPins (DefaultMaxPins) and PinExpiry (0: never) govern the bindings
	// of the open modes; MaxAgents (DefaultMaxAgents) bounds the certificates and holders
	// kept.
	AllowlistFile string
	MaxPins       int
	PinExpiry     time.Duration
	MaxAgents     int
	// RevocationSync is how often a node asks peers for a newer revocation list
	// (DefaultRevocationSync).
	RevocationSync time.Duration
	// Seed, when not 0, seeds the revocation sync's choice of peers, so that a simulated run
	// repeats it; 0 seeds from the clock.
	Seed uint64
	// CertCache, when set, is shared with other nodes of the process (the simulator): a
	// certificate's signature is checked once for all of them (authority.CertCache). Default
	// none.
	CertCache *authority.CertCache
	// Allow charges one request to a peer's message rate (the node's); nil allows all.
	Allow func(peer.ID) error
	// Track wraps the handlers of the protocols served, so that the node's Close waits for
	// them; nil serves them as they are.
	Track func(network.StreamHandler) network.StreamHandler
	// Addrs are the addresses an invitation carries.
	Addrs func() []ma.Multiaddr
	// Publish broadcasts an event to the mesh (a new revocation list); nil publishes nothing.
	Publish func(context.Context, protocol.EventPayload) error
	// Forget drops an agent from the liveness table when its certificate is revoked.
	Forget func(agentID string, p peer.ID, why string)
	// Clock is the time (time.Now); Log the logger (discarding).
	Clock func() time.Time
	Log   *slog.Logger
}

// DefaultMaxAgents bounds the certificates, holders and failures the book keeps, each: the
// node's max_agents default.
const DefaultMaxAgents = 10_000

// DefaultRevocationSync is how often a node in authority mode asks a few connected peers
// (revocationSyncPeers) whether they hold a newer revocation list: a node that missed the
// broadcast (down, partitioned, kept from it by peers that withhold gossip, or not yet holding
// the authority node's certificate) catches up within this, at the cost of a few small
// exchanges per interval, whatever the size of the mesh.
const DefaultRevocationSync = time.Minute

// Trust decides who may speak for which agent id, and what an agent may ask (docs/trust.md).
// It owns the bindings (pins or certificates), the conflicts, the mesh authority's protocols
// and books on its node, and the upkeep goroutine (revocation sync, renewal, saving pins),
// which Close stops and waits for. The mode's rules are its checker; the rest is shared.
type Trust struct {
	cfg   Config
	log   *slog.Logger
	quiet *quietlog.Logger
	now   func() time.Time

	store   *trustStore // pins, allowlist, conflicts
	check   checker     // the mode's rules
	certs   *certBook   // authority mode; nil in the open modes (the checker knows)
	tokens  *authority.Verifier
	invites *authority.InviteBook // the authority's node, with a data directory
	reg     *authority.Registry   // likewise

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// checker is a mode's rules: who may speak for an agent id, and what a binding teaches.
type checker interface {
	mode() string
	// claim returns nil when p may speak for agentID in a direct message (source).
	claim(ctx context.Context, agentID string, p peer.ID, source string) error
	// recipient returns nil when a message for agentID may go to p.
	recipient(ctx context.Context, agentID string, p peer.ID) error
	// bind records that a message of p for agentID was accepted.
	bind(agentID string, p peer.ID)
	// peerOf returns the peer agentID is bound to, if the mode binds.
	peerOf(agentID string) (peer.ID, bool)
	// heard reports whether a liveness transition of agentID's beats signed by p may teach
	// that agentID is at p (learn), or contradicts its binding (err).
	heard(agentID string, p peer.ID) (learn bool, err error)
	// grants returns the permissions p was granted (its certificate's).
	grants(p peer.ID) []string
}

// New builds the Trust of cfg: it resolves the mode, reads the pins or installs the node's
// certificate (a founder issues its own), and serves the mode's protocols. A half-built Trust
// is undone.
func New(cfg Config) (_ *Trust, err error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Allow == nil {
		cfg.Allow = func(peer.ID) error { return nil }
	}
	if cfg.Track == nil {
		cfg.Track = func(h network.StreamHandler) network.StreamHandler { return h }
	}
	if cfg.RevocationSync <= 0 {
		cfg.RevocationSync = DefaultRevocationSync
	}
	if cfg.MaxAgents <= 0 {
		cfg.MaxAgents = DefaultMaxAgents
	}
	t := &Trust{cfg: cfg, log: cfg.Log, now: cfg.Clock, quiet: quietlog.NewLogger(cfg.Log, quietlog.New(0, 0, 0), cfg.Clock)}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	if t.store, err = newTrustStore(cfg.DataDir, cfg.AllowlistFile, cfg.MaxPins, cfg.Clock); err != nil {
		return nil, err
	}
	if err := t.resolveMode(); err != nil {
		return nil, err
	}
	if t.cfg.Mode == Open {
		if len(cfg.TokenIssuers) > 0 {
			t.tokens = authority.NewVerifier(nil, t.tokenVerifierOptions()...)
		}
		t.check = openChecker{t.store}
		t.log.Warn("trust: open: any peer may claim an agent id nobody claimed before (trust on first use); for labs only, see docs/trust.md")
	} else if err := t.startAuthority(); err != nil {
		return nil, err
	}
	t.wg.Add(1)
	go t.keep()
	return t, nil
}

// resolveMode settles the mode and, on the authority's node, loads its key.
func (t *Trust) resolveMode() error {
	c := &t.cfg
	if c.MeshAuthority == nil && c.DataDir != "" {
		a, err := authority.Load(filepath.Join(c.DataDir, AuthorityKeyFile))
		switch {
		case err == nil:
			c.MeshAuthority = a
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("mesh authority: %w", err)
		}
	}
	if c.MeshAuthority != nil && c.Authority == "" {
		c.Authority = c.MeshAuthority.ID()
	}
	if c.Mode == "" {
		c.Mode = Open
		if c.Authority != "" {
			c.Mode = Authority
		}
	}
	switch c.Mode {
	case Open, Authority:
		return nil
	}
	return fmt.Errorf("trust %q: want %s or %s", c.Mode, Authority, Open)
}

// MeshID returns the mesh authority's id, "" in the open modes.
func (t *Trust) MeshID() string {
	if t.cfg.Mode == Authority {
		return t.cfg.Authority
	}
	return ""
}

// MeshAuthority returns the mesh authority's key when this node holds it (it founded the
// mesh), else nil.
func (t *Trust) MeshAuthority() *authority.Authority { return t.cfg.MeshAuthority }

// Certificate returns this node's agent certificate as it shows it (a compact JWS), "" in the
// open modes.
func (t *Trust) Certificate() string {
	if t.certs == nil {
		return ""
	}
	return t.certs.ownRaw()
}

// Mode says how this node decides who may speak for an agent id: Authority, Open or
// Allowlist.
func (t *Trust) Mode() string { return t.check.mode() }

// Claim returns nil when p may speak for agentID in a message it sent the node directly
// (source SourceMessage), fetching p's certificate in authority mode when none is held. A
// refusal is IDENTITY_INVALID naming the rule; a certificate that could not be fetched is an
// error a sender retries after (TIMEOUT, AGENT_NOT_FOUND).
func (t *Trust) Claim(ctx context.Context, agentID string, p peer.ID, source string) error {
	if p == t.cfg.Host.ID() {
		return nil
	}
	return t.check.claim(ctx, agentID, p, source)
}

// Recipient returns nil when a message for agentID may go to p: in authority mode, p holds a
// certificate for it (fetched when none is held; IDENTITY_INVALID when it does not).
func (t *Trust) Recipient(ctx context.Context, agentID string, p peer.ID) error {
	if p == t.cfg.Host.ID() {
		return nil
	}
	return t.check.recipient(ctx, agentID, p)
}

// Bind records that a message of p for agentID passed every check and was accepted: under
// trust on first use the first such message pins agentID to p. Nothing else binds.
func (t *Trust) Bind(agentID string, p peer.ID) { t.check.bind(agentID, p) }

// PeerOf returns the peer agentID is bound to (a pin, an allowlisted pair); authority mode
// binds nothing here: the directory and the DHT say where an agent is.
func (t *Trust) PeerOf(agentID string) (peer.ID, bool) { return t.check.peerOf(agentID) }

// Heard judges a liveness transition of agentID from beats signed by p: err when p may not
// speak for agentID (a heartbeat of another peer than the bound one is a conflict in the
// open modes); learn when it may teach that agentID is at p. Gossip refreshes a binding and
// never makes one (open modes), and teaches only with a verified certificate (authority).
func (t *Trust) Heard(agentID string, p peer.ID) (learn bool, err error) {
	return t.check.heard(agentID, p)
}

// GossipOptions are what gossip needs of trust: in authority mode the author check, the
// shun of stalling authors and this node's certificate for its heartbeats; none in the open
// modes.
func (t *Trust) GossipOptions() []pubsub.Option {
	if t.certs == nil {
		return nil
	}
	return t.certs.gossipOptions()
}

// DiscoveryOptions are what discovery needs of trust: in authority mode the certificate check
// of agent records and this node's certificate for its own; none in the open modes.
func (t *Trust) DiscoveryOptions() []discovery.Option {
	if t.certs == nil {
		return nil
	}
	return []discovery.Option{discovery.WithCertCheck(t.certs.checkRaw), discovery.WithCertificate(t.certs.ownRaw)}
}

// HeardEvent applies the revocation list a broadcast event carries (RevocationsEvent).
// Anyone may relay one; the list's own signature decides. Other events are not trust's.
func (t *Trust) HeardEvent(ev protocol.EventPayload, author peer.ID) {
	if t.certs == nil || ev.EventType != RevocationsEvent {
		return
	}
	data, _ := ev.Data.(map[string]any)
	crl, _ := data["crl"].(string)
	if crl == "" {
		return
	}
	if err := t.certs.applyRevocations(crl); err != nil {
		// at debug: whoever sends a bad list is charged by gossip, not by our log
		t.log.Debug("revocation list in an event refused", "from", author, "err", err.Error())
	}
}

// Close stops the upkeep, waits for it, saves the pins and stops serving the trust
// protocols. It is safe to call twice.
func (t *Trust) Close() error {
	var err error
	t.once.Do(func() {
		t.cancel()
		t.wg.Wait()
		if h := t.cfg.Host; h != nil {
			h.RemoveStreamHandler(CertProtocolID)
			h.RemoveStreamHandler(JoinProtocolID)
			h.RemoveStreamHandler(AuthorityProtocolID)
		}
		if t.store != nil {
			err = t.store.flush()
		}
	})
	return err
}

// keep is the upkeep: every second the pins are saved if they changed, every minute the
// unused ones expire; in authority mode, the revocation sync and the renewal of the node's
// own certificate.
func (t *Trust) keep() {
	defer t.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var syncC, renewC <-chan time.Time // nil in the open modes: never ready
	var renew *time.Timer
	if t.certs != nil {
		st := time.NewTicker(t.cfg.RevocationSync)
		defer st.Stop()
		renew = time.NewTimer(t.renewIn())
		defer renew.Stop()
		syncC, renewC = st.C, renew.C
	}
	seed := uint64(time.Now().UnixNano())
	if t.cfg.Seed != 0 {
		seed = t.cfg.Seed
	}
	r := rand.New(rand.NewPCG(seed, 6))
	lastExpiry := t.now()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-tick.C:
			if err := t.store.flush(); err != nil {
				t.log.Error("saving trust pins", "err", err.Error())
			}
			if now := t.now(); now.Sub(lastExpiry) >= time.Minute {
				lastExpiry = now
				t.expirePins()
			}
		case <-syncC:
			t.syncRevocations(r)
		case <-renewC:
			renew.Reset(t.renewOwn())
		}
	}
}

// expirePins forgets the pins no accepted message used within PinExpiry.
func (t *Trust) expirePins() {
	if t.cfg.PinExpiry <= 0 {
		return
	}
	if k := t.store.expire(t.now().Add(-t.cfg.PinExpiry)); k > 0 {
		t.log.Info("trust: expired unused pins", "pins", k, "unused_for", t.cfg.PinExpiry.String())
	}
}
