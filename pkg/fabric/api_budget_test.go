package fabric_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The exported surface of pkg/fabric is a budget, not an accident: every
// exported name is something a service author may have to learn. These
// ceilings only go down, below the target's 300 in all; the service-facing
// one strictly. Event payload types (catalog/payload), internal/
// packages, main packages and tests are not counted; a method counts when its
// receiver type is exported.
//
// Target (issue "one fact, one place"): 300 in all, 150 in the packages
// services import. Lower the ceilings whenever the count drops.
const (
	apiBudgetTotal         = 297
	apiBudgetServiceFacing = 150
)

const fabricModule = "github.com/agora-platform/agora/pkg/fabric"

func TestExportedAPIStaysWithinBudget(t *testing.T) {
	perPkg := exportedNames(t, ".")
	imported := importedByServices(t, filepath.Join("..", "..", "services"))
	total, facing := 0, 0
	var rows []string
	for pkg, names := range perPkg {
		total += len(names)
		mark := ""
		if imported[pkg] {
			facing += len(names)
			mark = " (imported by services)"
		}
		rows = append(rows, strconv.Itoa(len(names))+"\t"+pkg+mark)
	}
	sort.Strings(rows)
	t.Logf("exported names: %d in all, %d in the %d packages services import", total, facing, len(imported))
	if total > apiBudgetTotal || facing > apiBudgetServiceFacing {
		t.Errorf("pkg/fabric exports %d names (budget %d), %d of them in packages services import (budget %d):\n%s\n"+
			"unexport what no other package uses, or move operator-only code under pkg/fabric/internal",
			total, apiBudgetTotal, facing, apiBudgetServiceFacing, strings.Join(rows, "\n"))
	}
}

// exportedNames returns, per package directory relative to root ("." for
// the root package), its exported top-level names and methods.
func exportedNames(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel := filepath.ToSlash(path)
		switch {
		case d.Name() == "internal", d.Name() == "testdata", rel == "catalog/payload", strings.HasPrefix(rel, "catalog/payload/"):
			return filepath.SkipDir
		}
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, path, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for name, p := range pkgs {
			if name == "main" {
				continue
			}
			for _, f := range p.Files {
				if ast.IsGenerated(f) {
					continue
				}
				out[rel] = append(out[rel], fileExports(f)...)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func fileExports(f *ast.File) []string {
	var names []string
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv != nil && !ast.IsExported(receiverType(d.Recv.List[0].Type)) {
				continue
			}
			names = append(names, d.Name.Name)
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						names = append(names, s.Name.Name)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							names = append(names, n.Name)
						}
					}
				}
			}
		}
	}
	return names
}

func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// importedByServices returns the pkg/fabric packages (relative paths) that
// the services' production code imports.
func importedByServices(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case p == fabricModule:
				out["."] = true
			case strings.HasPrefix(p, fabricModule+"/"):
				out[strings.TrimPrefix(p, fabricModule+"/")] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
