package api

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Every route the server registers is in docs/openapi.yaml with its method, and the document
// has no path the server does not serve, so the two cannot drift.
func TestOpenAPI_DescribesEveryRoute(t *testing.T) {
	raw, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                          `yaml:"openapi"`
		Paths   map[string]map[string]yaml.Node `yaml:"paths"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Fatalf("openapi %q, want 3.1", doc.OpenAPI)
	}
	m := newAPIMesh(t, 1, meshOpts{})
	served := map[string]bool{}
	for _, rt := range m.servers[0].Routes() {
		key := strings.ToLower(rt.Method) + " " + rt.Path
		served[key] = true
		if _, ok := doc.Paths[rt.Path][strings.ToLower(rt.Method)]; !ok {
			t.Errorf("route %s %s is not in docs/openapi.yaml", rt.Method, rt.Path)
		}
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			if !served[method+" "+path] {
				t.Errorf("docs/openapi.yaml describes %s %s, which the server does not serve", method, path)
			}
		}
	}
}

var update = flag.Bool("update", false, "rewrite docs/openapi.json from docs/openapi.yaml")

// docs/openapi.json is docs/openapi.yaml as JSON, for the clients' tests, which read the spec
// with their languages' standard libraries (no YAML there). Regenerate it with
// `go test ./api -run TestOpenAPI_JSONIsTheYAML -update`.
func TestOpenAPI_JSONIsTheYAML(t *testing.T) {
	raw, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	want, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *update {
		if err := os.WriteFile("../docs/openapi.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("../docs/openapi.json")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("docs/openapi.json is not docs/openapi.yaml (%v): run go test ./api -run TestOpenAPI_JSONIsTheYAML -update", err)
	}
}
