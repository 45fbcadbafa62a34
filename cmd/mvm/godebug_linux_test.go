//go:build linux

package main

import "testing"

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
