package node

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// yamlKeys returns the config-file keys of Config's fields, in order ("-" fields are left out).
func yamlKeys(t *testing.T) []string {
	t.Helper()
	var keys []string
	ct := reflect.TypeFor[Config]()
	for i := 0; i < ct.NumField(); i++ {
		f := ct.Field(i)
		if !f.IsExported() {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key == "" {
			t.Errorf("Config.%s has no yaml tag: give it a config-file key, or \"-\" for programs only", f.Name)
			continue
		}
		if key != "-" {
			keys = append(keys, key)
		}
	}
	return keys
}

// The defaults are one table, DefaultConfig, and it passes its own checks once the one
// setting without a default is given.
func TestDefaultConfig_IsValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "agent_id") {
		t.Fatalf("Validate without an agent id = %v, want an error naming agent_id", err)
	}
	c.AgentID = "test:config:a"
	if err := c.Validate(); err != nil {
		t.Fatalf("DefaultConfig with an agent id: %v", err)
	}
	if c.DataDir != DefaultDataDir || c.MaxPins != DefaultMaxPins {
		t.Fatalf("DefaultConfig: data dir %q, max pins %d; want the named defaults", c.DataDir, c.MaxPins)
	}
}

// Validate names the config key at fault and its allowed range.
func TestValidate_NamesTheKeyAndRange(t *testing.T) {
	cases := []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.FrameTimeout = time.Millisecond }, "frame_timeout: at least 100 ms"},
		{func(c *Config) { c.IdleTimeout = 0 }, "idle_timeout: at least 1 s"},
		{func(c *Config) { c.HeartbeatInterval = 301 * time.Second }, "heartbeat_interval: 1 s to 300 s"},
		{func(c *Config) { c.ConnLow, c.ConnHigh = 10, 5 }, "conn_low/conn_high"},
		{func(c *Config) { c.Trust = "lax" }, "trust: authority or open"},
		{func(c *Config) { c.AuthorityNode = "not-a-peer" }, "authority_node"},
		{func(c *Config) { c.DataDir = "" }, "data_dir"},
	}
	for _, tc := range cases {
		c := DefaultConfig()
		c.AgentID = "test:config:a"
		tc.set(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate = %v, want an error containing %q", err, tc.want)
		}
	}
}

// The settings that once only WithConfig could reach have options, each setting its own
// fields and nothing else.
func TestOptions_ReachTheirSettings(t *testing.T) {
	c := DefaultConfig()
	for _, o := range []Option{WithTimeouts(time.Second, 2*time.Second), WithMDNS(true), WithDHTClient(true), WithAllowlist("allow.yaml")} {
		if err := o(&c); err != nil {
			t.Fatal(err)
		}
	}
	want := DefaultConfig()
	want.FrameTimeout, want.IdleTimeout, want.MDNS, want.DHTClient, want.AllowlistFile = time.Second, 2*time.Second, true, true, "allow.yaml"
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("options set\n%+v\nwant\n%+v", c, want)
	}
	if err := WithMeshAuthority(nil)(&c); err == nil {
		t.Fatal("WithMeshAuthority(nil) was accepted")
	}
}

// docs/node.md's configuration table names every key of the config file.
func TestConfigKeys_AreDocumented(t *testing.T) {
	raw, err := os.ReadFile("../docs/node.md")
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder // the rows of the page's tables
	for line := range strings.Lines(string(raw)) {
		if strings.HasPrefix(line, "| `") {
			table.WriteString(line)
		}
	}
	for _, key := range yamlKeys(t) {
		if !strings.Contains(table.String(), "`"+key+"`") {
			t.Errorf("docs/node.md's configuration table does not list the config key %q", key)
		}
	}
}
