package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// behindNode are the parts whose types node's face does not show: what api and sim (which
// may not import them) get from node is node's own types, converted at the face.
var behindNode = []string{"pubsub", "discovery"}

// passedDown are node's exported names that name a part's type on purpose: the options an
// embedding program passes down to the part, which node does not read.
var passedDown = map[string]bool{
	"Config.DiscoveryOptions": true, "Config.GossipOptions": true,
	"WithDiscovery": true, "WithGossip": true,
}

// Node's face names no type of the parts behind it: no alias of one, no exported field,
// function, method or type whose signature names one (docs/architecture.md, the face).
func TestFace_NodeShowsNoTypeOfThePartsBehindIt(t *testing.T) {
	dir := filepath.Join(root(t), "node")
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	fset := token.NewFileSet()
	checked := 0
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parts := partImports(f)
		if len(parts) == 0 {
			continue
		}
		face := exported(f)
		for _, name := range slices.Sorted(maps.Keys(face)) {
			expr := face[name]
			checked++
			if passedDown[name] {
				continue
			}
			if part := names(expr, parts); part != "" {
				t.Errorf("node.%s (%s) shows a type of package %s: give node a type of its own and convert at the face",
					name, filepath.Base(path), part)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no exported name of node was checked: the walk is broken")
	}
}

// partImports maps the names under which f imports the parts behind node to their paths.
func partImports(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		for _, part := range behindNode {
			if p != module+"/"+part {
				continue
			}
			name := part
			if imp.Name != nil {
				name = imp.Name.Name
			}
			out[name] = part
		}
	}
	return out
}

// exported returns f's exported names (a method as Type.Method, a field as Type.Field) with
// the expression that is their face: a function's signature, a field's or alias's type, the
// type of an exported constant or variable declared with one.
func exported(f *ast.File) map[string]ast.Expr {
	out := map[string]ast.Expr{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			name := d.Name.Name
			if d.Recv != nil {
				recv := receiver(d.Recv.List[0].Type)
				if !ast.IsExported(recv) {
					continue
				}
				name = recv + "." + name
			}
			out[name] = d.Type
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						typeFace(s, out)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && s.Type != nil {
							out[n.Name] = s.Type
						}
					}
				}
			}
		}
	}
	return out
}

// typeFace adds what an exported type shows: an alias its target, a struct its exported
// fields, an interface its methods, any other type its definition.
func typeFace(s *ast.TypeSpec, out map[string]ast.Expr) {
	name := s.Name.Name
	switch t := s.Type.(type) {
	case *ast.StructType:
		if s.Assign.IsValid() {
			out[name] = t
			return
		}
		for _, fl := range t.Fields.List {
			if len(fl.Names) == 0 {
				out[name+"."+receiver(fl.Type)] = fl.Type // embedded: its methods are shown
			}
			for _, n := range fl.Names {
				if n.IsExported() {
					out[name+"."+n.Name] = fl.Type
				}
			}
		}
	default:
		out[name] = t
	}
}

// receiver returns the type name of a receiver or embedded field (T, *T, T[P]).
func receiver(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return receiver(t.X)
	case *ast.IndexExpr:
		return receiver(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return t.Sel.Name
	}
	return ""
}

// names returns the part whose type e names, or "".
func names(e ast.Expr, parts map[string]string) string {
	found := ""
	ast.Inspect(e, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && parts[x.Name] != "" && found == "" {
				found = parts[x.Name]
			}
		}
		return found == ""
	})
	return found
}
