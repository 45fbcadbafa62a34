package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsOnlyTheTopLevelPackages: the command turns flags into the
// configurations of vmm, bench, report, cmdmode and exits/..., reads and writes
// results through runsummary, and depends on nothing below them (vcpu,
// devices, internal/...): what it needs of those, they pass on. Test files
// included.
func TestImportsOnlyTheTopLevelPackages(t *testing.T) {
	const module = "github.com/mvm-dev/mvm/"
	allowed := func(p string) bool {
		rel := strings.TrimPrefix(p, module)
		switch {
		case rel == "vmm", rel == "bench", rel == "report", rel == "runsummary", rel == "cmdmode", rel == "exits", strings.HasPrefix(rel, "exits/"):
			return true
		}
		return false
	}
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files here: %v", err)
	}
	fset := token.NewFileSet()
	seen := 0
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, module) {
				continue
			}
			seen++
			if !allowed(p) {
				t.Errorf("%s imports %s: cmd/mvm may import only vmm, bench, report, cmdmode, runsummary and exits/...", name, p)
			}
		}
	}
	if seen == 0 {
		t.Error("no imports of the module's packages found: the check looked at the wrong files")
	}
}
