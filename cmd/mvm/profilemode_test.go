package main

import "testing"

// --profile keeps every boolean spelling it had and takes light; its
// String is what mvm bench passes on to the runs, so it must parse back.
func TestProfileMode(t *testing.T) {
	for in, want := range map[string]profileMode{
		"true": profileExact, "1": profileExact, "T": profileExact,
		"false": profileOff, "0": profileOff, "light": profileLight,
	} {
		var m profileMode
		if err := m.Set(in); err != nil || m != want {
			t.Errorf("Set(%q) = %v, %v; want %v", in, m, err, want)
			continue
		}
		var back profileMode
		if err := back.Set(m.String()); err != nil || back != m {
			t.Errorf("Set(String() of %q = %q) = %v, %v", in, m.String(), back, err)
		}
	}
	for _, bad := range []string{"", "Light", "exact", "yes"} {
		var m profileMode
		if err := m.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
}
