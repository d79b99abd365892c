package sim

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// DefaultScenario is the scenario run when none is named: short, and it touches every
// feature once.
const DefaultScenario = "smoke"

//go:embed scenarios/*.yaml
var library embed.FS

// Info describes one scenario of the library.
type Info struct {
	Name        string
	Nodes       int
	Description string
}

// List returns the scenarios shipped in the binary, by name.
func List() ([]Info, error) {
	ents, err := fs.ReadDir(library, "scenarios")
	if err != nil {
		return nil, err
	}
	var out []Info
	for _, e := range ents {
		sc, err := Builtin(strings.TrimSuffix(e.Name(), ".yaml"))
		if err != nil {
			return nil, err
		}
		out = append(out, Info{Name: sc.Name, Nodes: sc.Nodes, Description: sc.Description})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Builtin returns the library scenario called name.
func Builtin(name string) (*Scenario, error) {
	raw, err := library.ReadFile(path.Join("scenarios", name+".yaml"))
	if err != nil {
		return nil, fmt.Errorf("no scenario %q in the library; `iacp-node sim --list` shows them", name)
	}
	sc, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("library scenario %s: %w", name, err)
	}
	return sc, nil
}

// Load returns the scenario in the file nameOrFile, or, when no such file exists and the
// argument has no path separator or .yaml suffix, the library scenario of that name.
func Load(nameOrFile string) (*Scenario, error) {
	raw, err := os.ReadFile(nameOrFile)
	if err == nil {
		sc, err := Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", nameOrFile, err)
		}
		return sc, nil
	}
	if strings.ContainsRune(nameOrFile, os.PathSeparator) || strings.HasSuffix(nameOrFile, ".yaml") || strings.HasSuffix(nameOrFile, ".yml") {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	return Builtin(nameOrFile)
}
