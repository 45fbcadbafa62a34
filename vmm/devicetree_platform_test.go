package vmm

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mvm-dev/mvm/internal/fdt/fdttest"
)

// The PL031 and its APB clock, as the bindings want them
// (bindings/rtc/arm,pl031.yaml, bindings/clock/fixed-clock.yaml).
func TestDeviceTreeRTC(t *testing.T) {
	d := testDeviceTree()
	d.RTC = RTCNode{Base: 0x0902_0000, Size: 0x1000, SPI: 2}
	got := buildDecompiled(t, d)
	rtc, ok := got["/rtc@9020000"]
	if !ok {
		t.Fatalf("no /rtc@9020000 node; nodes: %v", keys(got))
	}
	want := map[string][]byte{
		"compatible":  strsOf("arm,pl031", "arm,primecell"),
		"reg":         u64sOf(0x0902_0000, 0x1000),
		"interrupts":  cellsOf(0, 2, 4), // SPI 2, level high
		"clock-names": strsOf("apb_pclk"),
	}
	for name, v := range want {
		if !bytes.Equal(rtc[name], v) {
			t.Errorf("rtc %s = % x, want % x", name, rtc[name], v)
		}
	}
	// clocks names, by phandle, a fixed clock with no clock cells.
	ph := rtc["clocks"]
	var clocks []string
	for path, props := range got {
		if p, ok := props["phandle"]; ok && bytes.Equal(p, ph) {
			clocks = append(clocks, path)
		}
	}
	if len(clocks) != 1 {
		t.Fatalf("rtc clocks %x resolves to %v, want one node", ph, clocks)
	}
	clk := got[clocks[0]]
	if !bytes.Equal(clk["compatible"], strsOf("fixed-clock")) || !bytes.Equal(clk["#clock-cells"], cellsOf(0)) {
		t.Errorf("%s: compatible %q #clock-cells % x, want a fixed-clock with 0 cells", clocks[0], clk["compatible"], clk["#clock-cells"])
	}
	if f := clk["clock-frequency"]; len(f) != 4 || bytes.Equal(f, cellsOf(0)) {
		t.Errorf("%s: clock-frequency % x, want one non-zero cell", clocks[0], f)
	}
	if bytes.Equal(ph, got["/"]["interrupt-parent"]) {
		t.Errorf("the clock's phandle %x is the GIC's", ph)
	}

	// Without an RTC there is neither node.
	d.RTC = RTCNode{}
	got = buildDecompiled(t, d)
	for path := range got {
		if strings.HasPrefix(path, "/rtc") || strings.HasPrefix(path, "/apb-pclk") {
			t.Errorf("node %s without an RTC", path)
		}
	}
}

func TestDeviceTreeRTCValidation(t *testing.T) {
	cases := []struct {
		name string
		rtc  RTCNode
		want string
	}{
		{"over uart", RTCNode{Base: 0x0900_0000, Size: 0x1000, SPI: 2}, "overlaps"},
		{"shares uart SPI", RTCNode{Base: 0x0902_0000, Size: 0x1000, SPI: 1}, "UART and RTC share SPI 1"},
		{"too small for ids", RTCNode{Base: 0x0902_0000, Size: 0x100, SPI: 2}, "id registers"},
		{"SPI range", RTCNode{Base: 0x0902_0000, Size: 0x1000, SPI: 2000}, "out of range"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := testDeviceTree()
			d.RTC = tc.rtc
			if _, err := d.Build(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// buildDecompiled builds d and reads the blob back with dtc, which must
// not warn.
func buildDecompiled(t *testing.T, d DeviceTree) map[string]map[string][]byte {
	t.Helper()
	blob, err := d.Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	got, warnings := fdttest.Decompile(t, blob)
	if warnings != "" {
		t.Errorf("dtc warns about the tree:\n%s", warnings)
	}
	return got
}

func keys(m map[string]map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The PMU node (bindings/arm/pmu.yaml) with --pmu, and none without.
func TestDeviceTreePMU(t *testing.T) {
	d := testDeviceTree()
	d.PMU = true
	got := buildDecompiled(t, d)
	pmu, ok := got["/pmu"]
	if !ok {
		t.Fatalf("no /pmu node; nodes: %v", keys(got))
	}
	if !bytes.Equal(pmu["compatible"], strsOf("arm,armv8-pmuv3")) {
		t.Errorf("pmu compatible %q", pmu["compatible"])
	}
	// PPI 7 = INTID 23, what KVM_ARM_VCPU_PMU_V3_IRQ is given; level high.
	if !bytes.Equal(pmu["interrupts"], cellsOf(1, 7, 4)) {
		t.Errorf("pmu interrupts % x, want <1 7 4>", pmu["interrupts"])
	}
	if PMUIntID != 16+7 {
		t.Errorf("PMUIntID %d is not PPI 7", PMUIntID)
	}
	d.PMU = false
	got = buildDecompiled(t, d)
	if _, ok := got["/pmu"]; ok {
		t.Errorf("a /pmu node without --pmu")
	}
}
