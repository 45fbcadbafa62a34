//go:build linux

package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// bssIn finds the anonymous mapping right after the executable's, as the
// lab's mvm had it (TestFootprint's smaps), and nothing where there is none.
func TestBSSIn(t *testing.T) {
	maps := `00010000-005ff000 r-xp 00000000 00:02 87                                 /lab/mvm
00600000-00d51000 r--p 005f0000 00:02 87                                 /lab/mvm
00d60000-00de9000 rw-p 00d50000 00:02 87                                 /lab/mvm
00de9000-02e3a000 rw-p 00000000 00:00 0 
455cd6c00000-455cd7400000 rw-p 00000000 00:00 0 
`
	start, end, ok := bssIn(maps, "/lab/mvm")
	if !ok || start != 0xde9000 || end != 0x2e3a000 {
		t.Errorf("bssIn = %#x-%#x %v, want 0xde9000-0x2e3a000 true", start, end, ok)
	}
	noBSS := `00010000-005ff000 r-xp 00000000 00:02 87 /lab/mvm
00d60000-00de9000 rw-p 00d50000 00:02 87 /lab/mvm
00e00000-00f00000 rw-p 00000000 00:00 0
`
	if _, _, ok := bssIn(noBSS, "/lab/mvm"); ok {
		t.Error("bssIn found a .bss in a mapping that does not follow the executable's")
	}
	if _, _, ok := bssIn(maps, "/other/mvm"); ok {
		t.Error("bssIn found a .bss for an executable not in the maps")
	}
}

// On this host the exec'd process's .bss is found, and the exec leaves THP
// as it was for commands mvm starts (no MVM_THP_RESTORE in their env).
func TestBSSRangeHere(t *testing.T) {
	if _, _, ok := bssRange(); !ok {
		t.Skip("this test binary has no separate .bss mapping (linker layout)")
	}
	env := childEnvironFrom([]string{"PATH=/bin", godebugBeforeEnv + "=unset", thpRestoreEnv + "=1"})
	for _, kv := range env {
		if strings.HasPrefix(kv, thpRestoreEnv+"=") {
			t.Errorf("child environment keeps %s", kv)
		}
	}
}
