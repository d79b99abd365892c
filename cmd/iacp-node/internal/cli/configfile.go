package cli

import (
	"bytes"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/iacp-node/iacp-node/internal/fsutil"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// The config file that init writes is rendered from node.Config itself: every field with a
// yaml key, in the struct's order, at the value init chose, so a new setting cannot be left
// out of the file. Only the comments are written here, in configDoc; rendering fails on a
// key that has none, and on a comment whose key is gone.

// configHeader opens the config file.
const configHeader = `# iacp-node configuration. Every setting is shown, at its default unless init chose it;
# flags (--agent-id ...) and IACP_ environment variables (IACP_AGENT_ID ...) override this
# file. docs/node.md describes each key.
`

// configSkip names the keys of node.Config the file leaves out, each with the reason. A
// nested key is written parent.key.
var configSkip = map[string]string{
	"data_dir":                "the file lives in the data directory: run takes it from --data-dir",
	"manifest.agent_id":       "the node sets it to agent_id",
	"manifest.uptime_seconds": "the node fills it in when it answers",
}

// configDoc is the comment above each key of the config file. "" continues the paragraph of
// the key before it: no blank line, no comment of its own.
var configDoc = map[string]string{
	"agent_id":      "The agent this node serves: namespace:host:name, at most 64 characters.",
	"agent_name":    "The agent's name and version, in its manifest and heartbeats.",
	"agent_version": "",
	"manifest": `The capability manifest answered to queries and advertised in the DHT (draft "Capability
Manifest"). name and version default to agent_name and agent_version.`,

	"listen":    "libp2p listen multiaddrs; port 0 lets the kernel pick. Give a bootstrap node a fixed port.",
	"bootstrap": "Peers to join the mesh through: multiaddrs ending in /p2p/<peer id>.",
	"nat": `NAT traversal: AutoNAT v1 and v2, relay reservations while not known public, DCUtR hole
punching; no private address advertised once the node has a public or relay one.`,
	"reachability": `auto (AutoNAT finds out), public (a bootstrap node or relay with a public address) or
private (behind a NAT: relays and a client DHT from the start).`,
	"relay": `Serve circuit relay v2 to nodes behind NATs (once public); each relayed connection carries
at most relay_limit_bytes each way for relay_limit_duration (docs/deploy.md).`,
	"relay_limit_bytes":    "",
	"relay_limit_duration": "",

	"conn_low": `Connection manager: above conn_high connections it trims to conn_low, sparing those
younger than conn_grace.`,
	"conn_high":       "",
	"conn_grace":      "",
	"resource_memory": "Resource manager scaling: memory in bytes and file descriptors.",
	"resource_fds":    "",

	"max_message_bytes": "Largest /iacp/1.0.0 frame, in bytes.",
	"default_ttl":       "ttl_seconds of the messages this node builds.",
	"frame_timeout":     "Deadline of each frame read or write once started, and of every dial.",
	"idle_timeout":      "A stream idle this long is closed.",
	"receipt_window":    "A request answered within this window needs no separate receipt.",
	"shutdown_grace":    "How long shutdown waits for exchanges in flight.",

	"rate_per_second": `Per-peer inbound token buckets: messages (replies this node waits for are not counted) and
frame bytes. A peer over either is answered once with RATE_LIMITED and retry_after, its
stream is closed, and nothing of it is read until its bucket refills.`,
	"rate_burst":            "",
	"rate_bytes_per_second": "",
	"queue_stream_bytes": `Frames read and not yet served, in bytes: per stream, per peer and in all. A larger frame
waits until it can be served alone.`,
	"queue_peer_bytes":  "",
	"queue_total_bytes": "",
	"max_agents": `Agents tracked (directory and liveness table) and trust-on-first-use pins kept; beyond them
the least recently used are forgotten.`,
	"max_pins": "",
	"pin_expiry": `Unused trust-on-first-use pins are forgotten after pin_expiry (0: kept until forgotten with
iacp-node trust forget).`,
	"inbox_sender_bytes": fmt.Sprintf("Each sending peer's share of the inbox, in bytes (the inbox holds %d MiB).", node.DefaultInboxBytes>>20),
	"policy": `Which agents may use which intents; empty allows all. Example:
  policy:
    - agents: "ops:*:*"
      intents: [handoff, query]`,

	"trust": `Who may speak for an agent id (docs/trust.md). authority: only a peer holding an agent
certificate of the mesh authority named below (its id; the certificate is agent.cert in the
data dir). open: trust on first use, for labs. Empty: authority when authority is set or the
data dir holds authority.key, else open (with a warning).`,
	"authority": "",
	"intent_policy": `Authorization (docs/trust.md): the capabilities each intent requires of a request or event's
sender, granted by its certificate's permissions (iacp-node invite --grant) or by an A2ACP
token in security.auth_token. Example: intent_policy: {handoff: [tasks:write]}`,
	"token_issuers": "A2ACP token issuers trusted besides the mesh authority: Ed25519 keys written as peer ids.",
	"authority_node": `The peer id of the mesh authority's node, which renews this node's certificate when a third
of its life is left and issues A2ACP tokens (POST /auth/token). Empty: the bootstrap peers.`,
	"allowlist_file": "A YAML map of agent id to peer id: only those may speak (a closed mesh), in either mode.",

	"inbox": `Inbound messages no Go handler takes wait here until the agent acknowledges them through
the local API. 'iacp-node run' always turns this on.`,
	"dialect": `The draft the agent speaks: ` + protocol.DialectList(protocol.DialectNames(false)) + ` (docs/dialects.md).
The local API hands it its inbox, WebSocket and webhook messages in it, and the node refuses a
direct message that has no shape in it (CAPABILITY_MISMATCH, at the sender).`,
	"durable": `Durable delivery: every message is on disk before it is sent or receipted (<data dir>/store),
retried with backoff between retry_min and retry_max until its TTL.`,
	"retry_min": "",
	"retry_max": "",
	"approval_max": `Messages that require approval (security.require_approval) wait on this node until its
operator approves or rejects them ('iacp-node approvals'); at most this many, and
approval_max_bytes of them, else RATE_LIMITED (docs/coordination.md).`,
	"approval_max_bytes": "",
	"audit": `The tamper-evident audit log (<data dir>/audit); with audit_payloads false it records payload
hashes only (refused input never has its payload recorded). The oldest files go beyond
audit_max_bytes or audit_max_age (0: keep forever).`,
	"audit_payloads":  "",
	"audit_max_bytes": "",
	"audit_max_age":   "",

	"keep_alive":    "Keep-alive pings to needed peers, and the reconnect backoff bounds.",
	"reconnect_min": "",
	"reconnect_max": "",

	"discovery":          "Kademlia DHT for agent records and capability lookup; client mode stores nothing for others.",
	"dht_client":         "",
	"mdns":               "Also find peers on the local network with mDNS.",
	"gossip":             "gossipsub: broadcasts, capability groups, heartbeats and liveness; heartbeat_interval is 1s to 300s.",
	"heartbeat_interval": "",
	"suspect_after":      "Missed heartbeats before an agent is suspect (1 to 100); a leaving node's offline beat gets leave_flush to go out.",
	"mesh_budget":        "About how many heartbeats per interval the node hears on the heartbeat topic (1 to 100,000): in a larger mesh every agent stretches its beat there, and the agents the node deals with are probed directly every interval (docs/scale.md). Use the same on every node of a mesh.",
	"leave_flush":        "",
	"dht_quorum": `DHT tuning: answers a record lookup waits for (0: the whole lookup), Kademlia's k (2 to 100),
the backoff between bootstrap rounds until one reaches a peer, and how often the routing table is checked.`,
	"dht_bucket_size":     "",
	"bootstrap_retry_min": "",
	"bootstrap_retry_max": "",
	"dht_health_interval": "",

	"log_level": "debug, info, warn or error.",
	"memory_limit": `The process's soft memory limit in bytes (Go's runtime/debug.SetMemoryLimit): the garbage
collector works harder as the node nears it. 0 sets none; the environment variable GOMEMLIMIT,
when set, wins (docs/node.md, "Memory").`,
}

// writeConfig writes c as the config file at path, mode 0600.
func writeConfig(path string, c node.Config) error {
	b, err := renderConfig(c)
	if err != nil {
		return err
	}
	return fsutil.WriteFile(path, b, 0o600)
}

// renderConfig renders c as the config file.
func renderConfig(c node.Config) ([]byte, error) {
	return renderFile(configHeader, c, configDoc, configSkip)
}

// renderFile writes every yaml key of the struct v, in field order, under its comment in doc,
// except the keys in skip. Nested structs are written in full (omitempty is ignored: the file
// shows every setting), lists and maps in flow style.
func renderFile(header string, v any, doc, skip map[string]string) ([]byte, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Struct {
		return nil, fmt.Errorf("config file: %s is not a struct", rv.Type())
	}
	var b bytes.Buffer
	b.WriteString(header)
	used := map[string]bool{}
	for _, f := range yamlFields(rv) {
		if _, ok := skip[f.key]; ok {
			continue
		}
		comment, ok := doc[f.key]
		if !ok {
			return nil, fmt.Errorf("config file: key %q (%s.%s) has no comment: give it one in configDoc, or a reason in configSkip",
				f.key, rv.Type(), f.name)
		}
		used[f.key] = true
		if comment != "" {
			b.WriteString("\n")
			for line := range strings.SplitSeq(comment, "\n") {
				b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
			}
		}
		val, err := valueNode(f.value, f.key, skip, false)
		if err != nil {
			return nil, err
		}
		pair := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: f.key}, val}}
		enc := yaml.NewEncoder(&b)
		enc.SetIndent(2)
		if err := enc.Encode(pair); err != nil {
			return nil, fmt.Errorf("config file: %s: %w", f.key, err)
		}
		if err := enc.Close(); err != nil {
			return nil, fmt.Errorf("config file: %s: %w", f.key, err)
		}
	}
	var stale []string
	for k := range doc {
		if !used[k] {
			stale = append(stale, k)
		}
	}
	if len(stale) > 0 {
		sort.Strings(stale)
		return nil, fmt.Errorf("config file: comments for keys %s, which %s does not have", strings.Join(stale, ", "), rv.Type())
	}
	return b.Bytes(), nil
}

// yamlField is one field of a struct with its yaml key.
type yamlField struct {
	key, name string
	value     reflect.Value
}

// yamlFields lists the exported fields of the struct value v that yaml reads, with their keys
// (yaml's rule: the tag's name, else the field's name in lower case).
func yamlFields(v reflect.Value) []yamlField {
	var out []yamlField
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key == "-" {
			continue
		}
		if key == "" {
			key = strings.ToLower(f.Name)
		}
		out = append(out, yamlField{key: key, name: f.Name, value: v.Field(i)})
	}
	return out
}

var durationType = reflect.TypeFor[time.Duration]()

// valueNode is the YAML of v: strings double-quoted, durations as time.Duration writes them,
// lists and maps in flow style, structs with every field (block style at the top level, flow
// below). path names v in errors and in skip.
func valueNode(v reflect.Value, path string, skip map[string]string, nested bool) (*yaml.Node, error) {
	scalar := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }
	if v.Type() == durationType {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: time.Duration(v.Int()).String()}, nil
	}
	switch v.Kind() {
	case reflect.String:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Style: yaml.DoubleQuotedStyle, Value: v.String()}, nil
	case reflect.Bool:
		return scalar(strconv.FormatBool(v.Bool())), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return scalar(strconv.FormatInt(v.Int(), 10)), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return scalar(strconv.FormatUint(v.Uint(), 10)), nil
	case reflect.Float32, reflect.Float64:
		return scalar(strconv.FormatFloat(v.Float(), 'g', -1, 64)), nil
	case reflect.Slice, reflect.Array:
		n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for i := 0; i < v.Len(); i++ {
			e, err := valueNode(v.Index(i), fmt.Sprintf("%s[%d]", path, i), skip, true)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, e)
		}
		return n, nil
	case reflect.Map:
		n := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		keys := v.MapKeys()
		if len(keys) > 0 && keys[0].Kind() != reflect.String {
			return nil, fmt.Errorf("config file: %s: map keys are %s, not strings", path, keys[0].Type())
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			e, err := valueNode(v.MapIndex(k), path+"."+k.String(), skip, true)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, scalar(k.String()), e)
		}
		return n, nil
	case reflect.Struct:
		n := &yaml.Node{Kind: yaml.MappingNode}
		if nested {
			n.Style = yaml.FlowStyle
		}
		for _, f := range yamlFields(v) {
			p := path + "." + f.key
			if _, ok := skip[p]; ok {
				continue
			}
			e, err := valueNode(f.value, p, skip, true)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, scalar(f.key), e)
		}
		return n, nil
	}
	return nil, fmt.Errorf("config file: %s: cannot write a %s", path, v.Type())
}
