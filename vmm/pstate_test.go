package vmm

import "testing"

func TestExceptionLevel(t *testing.T) {
	for _, c := range []struct {
		pstate uint64
		want   string
	}{
		{0x3c5, "EL1h"}, // KVM's reset PSTATE: EL1h, DAIF masked
		{0x3c4, "EL1t"},
		{0x0, "EL0t"},
		{0x60000000, "EL0t"}, // condition flags do not change the mode
		{0x10, "AArch32"},
		{0x1f, "AArch32"},
		{0x9, "mode 0x9"}, // EL2h: not a guest mode here
	} {
		if got := exceptionLevel(c.pstate); got != c.want {
			t.Errorf("exceptionLevel(%#x) = %q, want %q", c.pstate, got, c.want)
		}
	}
}
