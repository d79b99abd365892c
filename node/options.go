package node

import (
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/discovery"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
	"github.com/iacp-node/iacp-node/store"
	"github.com/iacp-node/iacp-node/trust"
)

// Option changes the configuration before the node is built. New applies the options in
// order over DefaultConfig, then Config.Validate.
//
// There is an option for every setting a program embedding a node chooses: identity, data
// directory, addresses, trust, features and their timings. What an operator sets for a
// deployment has none: the name and version the agent reports in heartbeats and its
// manifest (agent_name, agent_version; a program can also name itself in the manifest it
// gives WithAgent), and the bounds (resource_memory, resource_fds, max_message_bytes, default_ttl,
// receipt_window, shutdown_grace, rate_bytes_per_second, queue_*_bytes, max_agents,
// max_pins, pin_expiry, inbox_sender_bytes, audit_max_bytes, audit_max_age, keep_alive,
// reconnect_min, reconnect_max). They belong in the config file, and a program reaches them
// with WithConfig or an Option of its own, which is only a function:
// func(c *Config) error { c.MaxPins = 16; return nil }. LogLevel has none because New does
// not read it (see Config.LogLevel).
type Option func(*Config) error

// WithConfig replaces the whole configuration (for example one read from a file); later
// options still apply on top. Start c from DefaultConfig: a field left zero is not defaulted
// again, and Validate refuses most zero bounds.
func WithConfig(c Config) Option { return func(dst *Config) error { *dst = c; return nil } }

// WithAgent sets the agent id and its manifest. Required: there is no default agent id.
func WithAgent(agentID string, m protocol.Manifest) Option {
	return func(c *Config) error { c.AgentID, c.Manifest = agentID, m; return nil }
}

// WithDataDir sets the data directory. Default DefaultDataDir; "" keeps nothing on disk,
// which needs WithKey and neither durable delivery nor the audit log.
func WithDataDir(dir string) Option { return func(c *Config) error { c.DataDir = dir; return nil } }

// WithListen sets the listen multiaddrs. Default: TCP and QUIC on every interface, ports the
// kernel picks. With WithHost they are not used.
func WithListen(addrs ...string) Option {
	return func(c *Config) error { c.ListenAddrs = addrs; return nil }
}

// WithBootstrap sets the bootstrap peers, multiaddrs ending in /p2p/<peer id>. Default none.
func WithBootstrap(addrs ...string) Option {
	return func(c *Config) error { c.Bootstrap = addrs; return nil }
}

// WithKey sets the identity key instead of the data directory's key file (the default).
func WithKey(k crypto.PrivKey) Option { return func(c *Config) error { c.Key = k; return nil } }

// WithHost makes the node use h (and close it) instead of building a host; k must be h's key.
// Default: the node builds its host from the listen, NAT, connection and resource settings.
func WithHost(h host.Host, k crypto.PrivKey) Option {
	return func(c *Config) error {
		if h == nil || k == nil {
			return fmt.Errorf("WithHost: host and key are required")
		}
		c.Host, c.Key = h, k
		return nil
	}
}

// WithAuthority runs the node in authority mode under the mesh authority meshID, with the
// agent certificate cert ("" reads <data dir>/agent.cert). Default: see Config.Trust.
func WithAuthority(meshID, cert string) Option {
	return func(c *Config) error {
		c.Trust, c.Authority, c.Certificate = trust.Authority, meshID, cert
		return nil
	}
}

// WithMeshAuthority makes the node the mesh authority a: authority mode under a's id, issuing
// its own certificate when it has none. Default: the key <data dir>/authority.key, if present.
func WithMeshAuthority(a *authority.Authority) Option {
	return func(c *Config) error {
		if a == nil {
			return fmt.Errorf("WithMeshAuthority: the authority is required")
		}
		c.Trust, c.Authority, c.MeshAuthority = trust.Authority, a.ID(), a
		return nil
	}
}

// WithAuthorityNode names the mesh authority's node, which renews certificates and issues
// tokens. Default: tried among the bootstrap peers (see Config.AuthorityNode).
func WithAuthorityNode(p peer.ID) Option {
	return func(c *Config) error { c.AuthorityNode = p.String(); return nil }
}

// WithIntentPolicy sets the capabilities each intent requires (see Config.IntentPolicy).
// Default: none required.
func WithIntentPolicy(p map[string][]string) Option {
	return func(c *Config) error { c.IntentPolicy = p; return nil }
}

// WithTokenIssuers trusts A2ACP token issuers besides the mesh authority (see
// Config.TokenIssuers). Default none.
func WithTokenIssuers(ids ...string) Option {
	return func(c *Config) error { c.TokenIssuers = ids; return nil }
}

// WithTrust sets the trust mode: trust.Authority or trust.Open. Default: authority when an
// authority is configured or the data directory holds its key, else open (see Config.Trust).
func WithTrust(mode string) Option { return func(c *Config) error { c.Trust = mode; return nil } }

// WithAllowlist names a YAML or JSON file mapping agent id to peer id: only those pairs may
// speak, in either trust mode (see Config.AllowlistFile). Default "": no allowlist.
func WithAllowlist(file string) Option {
	return func(c *Config) error { c.AllowlistFile = file; return nil }
}

// WithHandler registers h for an intent before the node starts serving, as Handle does once
// New has returned. A message that arrives between New and Handle finds no handler: it waits
// in the inbox for the agent to fetch it (with the inbox off, an event is taken as it is), and
// so does what the durable inbox held from before a restart, which New offers again. An agent
// that handles an intent in Go registers it here, and gets all of them. The last handler given
// for an intent counts.
func WithHandler(intent protocol.Intent, h Handler) Option {
	return func(c *Config) error {
		if h == nil {
			return fmt.Errorf("handler for intent %q is nil", intent)
		}
		m := maps.Clone(c.Handlers) // a Config given to several nodes does not share its map
		if m == nil {
			m = make(map[protocol.Intent]Handler)
		}
		m[intent] = h
		c.Handlers = m
		return nil
	}
}

// WithOtherHandler registers h, before the node starts serving, for every message no intent
// handler takes, as HandleOther does once New has returned (see WithHandler for why before).
func WithOtherHandler(h Handler) Option {
	return func(c *Config) error {
		if h == nil {
			return fmt.Errorf("the handler for other messages is nil")
		}
		c.OtherHandler = h
		return nil
	}
}

// WithClock sets the time source. Default time.Now.
func WithClock(now func() time.Time) Option {
	return func(c *Config) error { c.Clock = now; return nil }
}

// WithVerifier sets the signature verifier and its caches (default: the node's own, see
// Config.Verifier); gossip verifies with it too. A process that runs many nodes can give them
// one to share.
func WithVerifier(v *protocol.Verifier) Option {
	return func(c *Config) error { c.Verifier = v; return nil }
}

// WithCertCache shares c, a cache of verified certificates, with the node (Config.CertCache).
// Default none.
func WithCertCache(c *authority.CertCache) Option {
	return func(cfg *Config) error { cfg.CertCache = c; return nil }
}

// WithLogger sets the logger. Default: go-log's slog bridge, under the subsystem "iacp".
func WithLogger(l *slog.Logger) Option { return func(c *Config) error { c.Logger = l; return nil } }

// WithRateLimit sets the per-peer inbound token bucket: perSecond messages a second in bursts
// of burst. Defaults 200 and 400.
func WithRateLimit(perSecond float64, burst int) Option {
	return func(c *Config) error { c.RatePerSecond, c.RateBurst = perSecond, burst; return nil }
}

// WithPolicy sets which agents may use which intents. Default none: every agent may use every
// intent.
func WithPolicy(rules ...PolicyRule) Option {
	return func(c *Config) error { c.Policy = rules; return nil }
}

// WithInbox switches the inbox on or off (see Config.Inbox). Default off; `iacp-node run`
// turns it on.
func WithInbox(on bool) Option { return func(c *Config) error { c.Inbox = on; return nil } }

// WithDialect names the draft the agent speaks (see Config.Dialect): one of
// protocol.Dialects. Default iacp.
func WithDialect(name string) Option { return func(c *Config) error { c.Dialect = name; return nil } }

// WithDiscovery switches the DHT on or off and adds options for discovery.New, applied after
// the ones the Config's dht_* and bootstrap_retry_* settings make. Default on.
func WithDiscovery(on bool, opts ...discovery.Option) Option {
	return func(c *Config) error {
		c.Discovery = on
		c.DiscoveryOptions = append(c.DiscoveryOptions, opts...)
		return nil
	}
}

// WithDHTClient runs the DHT in client mode, for a node others cannot reach: it queries but
// stores nothing for others. Default false: server mode.
func WithDHTClient(on bool) Option { return func(c *Config) error { c.DHTClient = on; return nil } }

// WithMDNS also finds peers on the local network with mDNS. Default false.
func WithMDNS(on bool) Option { return func(c *Config) error { c.MDNS = on; return nil } }

// WithGossip switches gossipsub on or off and adds options for pubsub.New, applied after the
// ones the Config makes (heartbeat_interval, suspect_after, leave_flush). Default on.
func WithGossip(on bool, opts ...pubsub.Option) Option {
	return func(c *Config) error {
		c.Gossip = on
		c.GossipOptions = append(c.GossipOptions, opts...)
		return nil
	}
}

// WithHeartbeatInterval sets how often the node announces its status, 1 s to 300 s. Default
// 30 s.
func WithHeartbeatInterval(d time.Duration) Option {
	return func(c *Config) error { c.HeartbeatInterval = d; return nil }
}

// WithMeshBudget sets about how many heartbeats per interval the node hears on the heartbeat
// topic before the mesh's beats stretch (Config.MeshBudget; default 64).
func WithMeshBudget(beats int) Option {
	return func(c *Config) error { c.MeshBudget = beats; return nil }
}

// WithDurable switches durable delivery on or off and adds options for store.Open. Default on,
// with the store's own defaults.
func WithDurable(on bool, opts ...store.Option) Option {
	return func(c *Config) error {
		c.Durable = on
		c.StoreOptions = append(c.StoreOptions, opts...)
		return nil
	}
}

// WithAudit switches the audit log on or off; payloads says whether it records payloads.
// Defaults on and true.
func WithAudit(on, payloads bool) Option {
	return func(c *Config) error { c.Audit, c.AuditPayloads = on, payloads; return nil }
}

// WithRetry sets the backoff bounds between delivery attempts of a queued message. Defaults
// 1 s and 1 min.
func WithRetry(lo, hi time.Duration) Option {
	return func(c *Config) error { c.RetryMin, c.RetryMax = lo, hi; return nil }
}

// WithTimeouts sets the deadline of each frame read or write once started, and of every dial
// (frame, at least 100 ms), and how long a stream may carry nothing before it is closed
// (idle, at least 1 s). Defaults 10 s and 60 s.
func WithTimeouts(frame, idle time.Duration) Option {
	return func(c *Config) error { c.FrameTimeout, c.IdleTimeout = frame, idle; return nil }
}

// WithConnections sets the connection manager's watermarks and grace period (Config.ConnLow,
// ConnHigh, ConnGrace). Defaults 64, 192 and 1 min. With WithHost they are not used: the
// given host has its own.
func WithConnections(low, high int, grace time.Duration) Option {
	return func(c *Config) error { c.ConnLow, c.ConnHigh, c.ConnGrace = low, high, grace; return nil }
}

// WithNAT switches NAT traversal (AutoNAT, the circuit relay v2 client, hole punching) on or
// off. Default on. With WithHost it is not used.
func WithNAT(on bool) Option { return func(c *Config) error { c.NAT = on; return nil } }
