package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/node"
)

// fill sets every field of v that yaml reads to a value of its own, not zero and not the
// default: one element in each list, one key in each map, every field of nested structs.
func fill(v reflect.Value, n *int) {
	*n++
	if v.Type() == durationType {
		v.SetInt(int64(time.Duration(*n) * time.Second))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	case reflect.Bool:
		v.SetBool(*n%2 == 0) // both values occur
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), n)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, n)
		fill(e, n)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for _, f := range yamlFields(v) {
			fill(f.value, n)
		}
	}
}

// Every setting of node.Config, whatever its value, is written to the file and reads back as
// it was: the file is rendered from the struct, so a field added to Config is in it.
func TestRenderConfig_EverySettingReadsBack(t *testing.T) {
	var want node.Config
	n := 0
	fill(reflect.ValueOf(&want).Elem(), &n)
	raw, err := renderConfig(want)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), ConfigFile)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	got, _, err := loadConfig(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
	// What the file leaves out (configSkip) reads back as the default.
	def := node.DefaultConfig()
	want.DataDir, want.Manifest.AgentID, want.Manifest.UptimeSeconds = def.DataDir, def.Manifest.AgentID, def.Manifest.UptimeSeconds
	// The signature verifier is a program's own object, never in the file (yaml:"-").
	got.Verifier = nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the config file does not read back:\n got %+v\nwant %+v\nfile:\n%s", got, want, raw)
	}
}

// A key without a comment, or a comment without its key, stops the rendering and says what to
// change.
func TestRenderFile_RefusesUndocumentedAndStaleKeys(t *testing.T) {
	type settings struct {
		Alpha int    `yaml:"alpha"`
		Beta  string `yaml:"beta"`
		Gamma bool   `yaml:"-"`
	}
	v := settings{Alpha: 1, Beta: "b"}
	out, err := renderFile("", v, map[string]string{"alpha": "The first.", "beta": ""}, nil)
	if err != nil || string(out) != "\n# The first.\nalpha: 1\nbeta: \"b\"\n" {
		t.Fatalf("renderFile = %q, %v", out, err)
	}
	if _, err := renderFile("", v, map[string]string{"alpha": "The first."}, nil); err == nil || !strings.Contains(err.Error(), `"beta"`) {
		t.Fatalf("a key without a comment: %v", err)
	}
	if _, err := renderFile("", v, map[string]string{"alpha": "x"}, map[string]string{"beta": "not in the file"}); err != nil {
		t.Fatalf("a skipped key: %v", err)
	}
	doc := map[string]string{"alpha": "x", "beta": "", "delta": "gone"}
	if _, err := renderFile("", v, doc, nil); err == nil || !strings.Contains(err.Error(), "delta") {
		t.Fatalf("a comment without its key: %v", err)
	}
}
