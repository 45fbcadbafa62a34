package vmm

import (
	"strings"
	"testing"

	"github.com/mvm-dev/mvm/internal/kvm"
)

// TestCheckPMU runs the --pmu capability check against fake hosts: the
// lab's KVM has a guest PMU, so the refusal is tested here.
func TestCheckPMU(t *testing.T) {
	// KVM_CAP_ARM_PMU_V3 from include/uapi/linux/kvm.h.
	const kvmCapARMPMUv3 = 126
	cases := []struct {
		name string
		caps map[int]int
		ok   bool
	}{
		{"has PMU", map[int]int{kvmCapARMPMUv3: 1}, true},
		{"no PMU", map[int]int{}, false},
		{"ioctl failed", map[int]int{kvmCapARMPMUv3: -1}, false},
		{"other caps only", map[int]int{125: 1, 127: 1, 168: 1}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var asked []int
			err := checkPMU(func(capability kvm.Cap) int {
				asked = append(asked, int(capability))
				return c.caps[int(capability)]
			})
			if len(asked) != 1 || asked[0] != kvmCapARMPMUv3 {
				t.Errorf("asked for capabilities %v, want only KVM_CAP_ARM_PMU_V3 (%d)", asked, kvmCapARMPMUv3)
			}
			if c.ok {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("--pmu accepted on a host without KVM_CAP_ARM_PMU_V3")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "--pmu: ") || !strings.Contains(msg, "run without --pmu") {
				t.Errorf("error %q is not one line naming --pmu and what to do", msg)
			}
		})
	}
}
