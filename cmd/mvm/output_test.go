package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkOutput and checkOutputDir say, without creating anything, whether a
// file or directory can be made where a flag names it.
func TestCheckOutput(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "exists.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		says string // "" for no error
	}{
		{"", ""},
		{"-", ""},
		{filepath.Join(dir, "new.json"), ""},
		{file, ""}, // overwritten later
		{dir, "is a directory"},
		{filepath.Join(dir, "no", "new.json"), "directory " + filepath.Join(dir, "no") + " does not exist"},
		{filepath.Join(file, "new.json"), "not a directory"},
	} {
		err := checkOutput("--flag", c.path)
		var ue usageError
		switch {
		case c.says == "" && err != nil:
			t.Errorf("checkOutput(%q) = %v, want nil", c.path, err)
		case c.says != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), "--flag "+c.path+": ") || !strings.Contains(err.Error(), c.says)):
			t.Errorf("checkOutput(%q) = %v, want a usage error naming --flag and the path, saying %q", c.path, err, c.says)
		}
	}
	if err := checkOutput("--console file:", filepath.Join(dir, "no", "c.log")); err == nil || !strings.HasPrefix(err.Error(), "--console file:"+filepath.Join(dir, "no", "c.log")+": ") {
		t.Errorf("console file error %v, want it to start --console file:PATH", err)
	}

	for _, c := range []struct {
		path string
		says string
	}{
		{"", ""},
		{dir, ""},
		{filepath.Join(dir, "a", "b", "c"), ""}, // MkdirAll makes them
		{file, "is not a directory"},
		{filepath.Join(file, "logs"), file + " is not a directory"},
	} {
		err := checkOutputDir("--dir", c.path)
		var ue usageError
		switch {
		case c.says == "" && err != nil:
			t.Errorf("checkOutputDir(%q) = %v, want nil", c.path, err)
		case c.says != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), c.says)):
			t.Errorf("checkOutputDir(%q) = %v, want a usage error saying %q", c.path, err, c.says)
		}
	}
	// Nothing was created.
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 {
		t.Errorf("the checks left %v in %s (%v)", ents, dir, err)
	}
	// A directory mvm cannot write to (root writes anywhere, except on a
	// read-only file system).
	if os.Getuid() != 0 {
		ro := filepath.Join(dir, "ro")
		os.Mkdir(ro, 0o555)
		if err := checkOutput("--flag", filepath.Join(ro, "x")); err == nil || !strings.Contains(err.Error(), "cannot create") {
			t.Errorf("checkOutput in a read-only directory = %v", err)
		}
	}
}
