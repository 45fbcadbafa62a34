package kvm

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyHomeImportsHype keeps this package the one home of the KVM API:
// no other package of mvm may import hype's kvm package, except
// internal/x86vm, the x86 host's test VM, which drives x86 KVM with its
// own registers.
func TestOnlyHomeImportsHype(t *testing.T) {
	const hype = "github.com/c35s/hype/kvm"
	root := filepath.Join("..", "..")
	allowed := map[string]bool{filepath.Join("internal", "kvm"): true, filepath.Join("internal", "x86vm"): true}
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "out" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == hype && !allowed[filepath.Dir(rel)] {
				t.Errorf("%s imports %s: call internal/kvm instead", rel, hype)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked %d Go files from %s; expected the whole module", files, root)
	}
}
