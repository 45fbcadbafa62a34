//go:build linux

package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The settings mvm needs are added once; a key the user gave is kept
// with the user's value, and a key that merely ends like one does not
// count.
func TestWithSettings(t *testing.T) {
	for _, c := range []struct {
		in, out string
		changed bool
	}{
		{"", "disablethp=1,asyncpreemptoff=1", true},
		{"gctrace=1", "gctrace=1,disablethp=1,asyncpreemptoff=1", true},
		{"disablethp=0", "disablethp=0,asyncpreemptoff=1", true},
		{"asyncpreemptoff=0,disablethp=1", "asyncpreemptoff=0,disablethp=1", false},
		{"xdisablethp=1", "xdisablethp=1,disablethp=1,asyncpreemptoff=1", true},
	} {
		out, changed := withSettings(c.in)
		if out != c.out || changed != c.changed {
			t.Errorf("withSettings(%q) = %q, %v; want %q, %v", c.in, out, changed, c.out, c.changed)
		}
		if again, ch := withSettings(out); again != out || ch {
			t.Errorf("withSettings(%q) changes it again: %q", out, again)
		}
	}
}

// A command mvm starts gets the GODEBUG mvm was started with, not mvm's
// runtime settings: the user's value back, or none if there was none; with
// no exec (no saved value) mvm's environment is passed on as it is.
func TestChildEnviron(t *testing.T) {
	for _, c := range []struct {
		name    string
		environ []string
		want    []string
	}{
		{"unset before", []string{"PATH=/bin", "GODEBUG=disablethp=1,asyncpreemptoff=1", godebugBeforeEnv + "=unset"}, []string{"PATH=/bin"}},
		{"user's value", []string{"GODEBUG=gctrace=1,disablethp=1,asyncpreemptoff=1", "HOME=/root", godebugBeforeEnv + "=set:gctrace=1"}, []string{"HOME=/root", "GODEBUG=gctrace=1"}},
		{"set but empty", []string{"GODEBUG=disablethp=1,asyncpreemptoff=1", godebugBeforeEnv + "=set:"}, []string{"GODEBUG="}},
		{"no exec", []string{"GODEBUG=disablethp=1,asyncpreemptoff=1"}, nil},
	} {
		if got := childEnvironFrom(c.environ); !slices.Equal(got, c.want) {
			t.Errorf("%s: childEnvironFrom(%q) = %q, want %q", c.name, c.environ, got, c.want)
		}
	}
}

// execPath keeps the binary's own path only while it names the running
// file: a copy (another inode), a missing file or an os.Executable error
// give /proc/self/exe.
func TestExecPath(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got := execPath(self, nil); got != self {
		t.Errorf("execPath(own path) = %q, want %q", got, self)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "mvm")
	if err := os.WriteFile(cp, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		exe string
		err error
	}{{cp, nil}, {cp + ".missing", nil}, {self, errors.New("no executable")}} {
		if got := execPath(c.exe, c.err); got != "/proc/self/exe" {
			t.Errorf("execPath(%q, %v) = %q, want /proc/self/exe", c.exe, c.err, got)
		}
	}
}
