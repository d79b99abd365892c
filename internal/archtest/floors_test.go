// Package archtest checks the shape of the module (docs/architecture.md): which package may
// import which, and how long files and functions grow.
package archtest

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/iacp-node/iacp-node"

// floors puts every package of the module on a floor, and a package imports only packages on
// lower floors. Read from the bottom: small helpers; the pure core (the wire format, keys, the
// mesh authority's signatures); the parts the node composes (the delivery engine over the
// store and the audit log); the node; the coordination patterns and workflows over the node;
// what stands on them (the local API, the simulator, MCP, A2A); the command line.
var floors = map[string]int{
	"internal/fsutil": 0, "internal/retry": 0, "internal/workers": 0, "internal/quietlog": 0, "internal/testsupport": 0, "sim/internal/mocknet": 0,
	"protocol": 1, "identity": 1, "apiclient": 1,
	"authority": 2, "dialect": 2,
	"audit": 3, "store": 3, "discovery": 3, "pubsub": 3,
	"delivery": 4, "trust": 4,
	"node":  5,
	"coord": 6, "workflow": 6,
	"api": 7, "sim": 7,
	"mcpserver": 8, "a2abridge": 8,
	"cmd/iacp-node/internal/cli": 9,
	"cmd/iacp-node":              10, "e2e": 10, "e2e/netlab": 10, "internal/archtest": 10,
}

// coreFloor is the highest floor of the core; onNodeAlone are the packages that reach the
// mesh through node only: above the core they import only node and what stands on node
// (nodeAndAbove).
const coreFloor = 2

var (
	onNodeAlone  = []string{"coord", "workflow", "api", "sim"}
	nodeAndAbove = []string{"node", "coord", "workflow"}
)

func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("the module root is not two levels up: %v", err)
	}
	return dir
}

// isFile reports whether path is a regular file.
func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// packages returns the module's package directories, relative to root, with their imports
// of the module's own packages (tests excluded: a test may import what its package may not).
func packages(t *testing.T, rootDir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(rootDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != rootDir && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "bin") {
			return filepath.SkipDir
		}
		if path != rootDir && isFile(filepath.Join(path, "go.mod")) {
			return filepath.SkipDir // a nested module (bench/): not this module's, as for the go tool
		}
		pkg, err := build.ImportDir(path, 0)
		if err != nil {
			return nil // no Go files (or only tests): nothing to place
		}
		rel, _ := filepath.Rel(rootDir, path)
		rel = filepath.ToSlash(rel)
		var own []string
		for _, imp := range pkg.Imports {
			if p, ok := strings.CutPrefix(imp, module+"/"); ok {
				own = append(own, p)
			}
		}
		out[rel] = own
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every package has a floor and imports only from the floors below it; api and sim reach the
// mesh through node alone.
func TestFloors_ImportsPointDown(t *testing.T) {
	pkgs := packages(t, root(t))
	if len(pkgs) < 10 {
		t.Fatalf("found %d packages: the walk is broken", len(pkgs))
	}
	for pkg, imports := range pkgs {
		floor, ok := floors[pkg]
		if !ok {
			t.Errorf("package %s has no floor: add it to floors (and to docs/architecture.md)", pkg)
			continue
		}
		for _, imp := range imports {
			f, ok := floors[imp]
			switch {
			case !ok:
				t.Errorf("%s imports %s, which has no floor", pkg, imp)
			case f >= floor:
				t.Errorf("%s (floor %d) imports %s (floor %d): imports point down only", pkg, floor, imp, f)
			case slices.Contains(onNodeAlone, pkg) && f > coreFloor && !slices.Contains(nodeAndAbove, imp):
				t.Errorf("%s imports %s: it reaches the mesh through node alone", pkg, imp)
			}
		}
	}
}

// Size limits: a file past maxFileLines or a function past maxFuncLines needs a comment that
// says why (a line in its doc comment, or the file's, starting "Long:").
const (
	maxFileLines = 450
	maxFuncLines = 70
)

func TestSize_FilesAndFunctionsStaySmall(t *testing.T) {
	rootDir := root(t)
	fset := token.NewFileSet()
	for pkg := range packages(t, rootDir) {
		files, _ := filepath.Glob(filepath.Join(rootDir, pkg, "*.go"))
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(rootDir, path)
			if n := fset.File(f.Pos()).LineCount(); n > maxFileLines && !saysWhy(f.Doc) {
				t.Errorf("%s has %d lines (over %d): split it, or say why in its package comment (Long: ...)", rel, n, maxFileLines)
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				if n > maxFuncLines && !saysWhy(fd.Doc) {
					t.Errorf("%s: %s has %d lines (over %d): split it, or say why in its doc comment (Long: ...)", rel, fd.Name.Name, n, maxFuncLines)
				}
			}
		}
	}
}

func saysWhy(doc *ast.CommentGroup) bool {
	if doc == nil {
		return false
	}
	for _, line := range strings.Split(doc.Text(), "\n") {
		if strings.HasPrefix(line, "Long:") {
			return true
		}
	}
	return false
}

// withoutMesh are the packages that build without go-libp2p: the API's Go client, and the MCP
// server on it, which carry no mesh code (docs/architecture.md).
var withoutMesh = []string{"apiclient", "mcpserver"}

// The API's Go client and the MCP server import no go-libp2p, directly or not, and apiclient
// imports nothing of the module but the floor-0 helpers.
func TestFloors_ClientsBuildWithoutLibp2p(t *testing.T) {
	dir := root(t)
	for _, pkg := range withoutMesh {
		cmd := exec.Command("go", "list", "-deps", "./"+pkg)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.Contains(dep, "libp2p") {
				t.Errorf("%s depends on %s: it must build without go-libp2p (through apiclient, not api or protocol)", pkg, dep)
			}
		}
	}
	for _, imp := range packages(t, dir)["apiclient"] {
		if floors[imp] != 0 {
			t.Errorf("apiclient imports %s: it stands on the floor-0 helpers alone", imp)
		}
	}
}
