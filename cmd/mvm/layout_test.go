package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestREADMELayoutNamesEveryPackage: the README's layout table has a row
// for every package of the module, and no row for a package that is gone,
// so the table stays the map of what each package is for.
func TestREADMELayoutNamesEveryPackage(t *testing.T) {
	const module = "github.com/mvm-dev/mvm"
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no \"## Layout\" section")
	}
	if i := strings.Index(table, "\n## "); i >= 0 {
		table = table[:i]
	}
	rows := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		cell, ok := strings.CutPrefix(line, "| `")
		if !ok {
			continue
		}
		path, _, _ := strings.Cut(cell, "`")
		rows[strings.TrimSuffix(path, "/")] = true
	}
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", module+"/...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		pkgs[rel] = true
		if !rows[rel] {
			t.Errorf("README.md's layout table has no row for %s: add one saying what it is for", rel)
		}
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages: the check looked at the wrong tree", len(pkgs))
	}
	for r := range rows {
		if r != "docs" && !pkgs[r] {
			t.Errorf("README.md's layout table has a row for %s, which is not a package of the module", r)
		}
	}
}
