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
	d.Devices = append(d.Devices, RTCNode{Base: 0x0902_0000, Size: 0x1000, SPI: 2}.Node())
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
	got = buildDecompiled(t, testDeviceTree())
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
			d.Devices = append(d.Devices, tc.rtc.Node())
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
	d.Devices = append(d.Devices, PMUNode())
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
	got = buildDecompiled(t, testDeviceTree())
	if _, ok := got["/pmu"]; ok {
		t.Errorf("a /pmu node without --pmu")
	}
}

// The PL011 as the console (bindings/serial/pl011.yaml): an arm,primecell
// with uartclk and apb_pclk, which must both resolve to a fixed clock, the
// same one the PL031 uses (written once); stdout-path names it.
func TestDeviceTreePL011(t *testing.T) {
	d := testDeviceTree()
	d.Devices[0] = PL011Node{Base: 0x0900_0000, Size: 0x1000, SPI: 1}.Node()
	d.Devices = append(d.Devices, RTCNode{Base: 0x0902_0000, Size: 0x1000, SPI: 2}.Node())
	got := buildDecompiled(t, d)
	uart, ok := got["/serial@9000000"]
	if !ok {
		t.Fatalf("no /serial@9000000 node; nodes: %v", keys(got))
	}
	want := map[string][]byte{
		"compatible":  strsOf("arm,pl011", "arm,primecell"),
		"reg":         u64sOf(0x0900_0000, 0x1000),
		"interrupts":  cellsOf(0, 1, 4), // SPI 1 = INTID 33, level high
		"clock-names": strsOf("uartclk", "apb_pclk"),
	}
	for name, v := range want {
		if !bytes.Equal(uart[name], v) {
			t.Errorf("serial %s = % x, want % x", name, uart[name], v)
		}
	}
	if len(uart) != len(want)+1 {
		t.Errorf("serial node has properties %v, want those of %v and clocks", uart, want)
	}
	clocks := uart["clocks"]
	if len(clocks) != 8 || !bytes.Equal(clocks[:4], clocks[4:]) {
		t.Fatalf("serial clocks % x, want two cells naming one clock", clocks)
	}
	var targets []string
	for path, props := range got {
		if p, ok := props["phandle"]; ok && bytes.Equal(p, clocks[:4]) {
			targets = append(targets, path)
		}
	}
	if len(targets) != 1 || !bytes.Equal(got[targets[0]]["compatible"], strsOf("fixed-clock")) {
		t.Fatalf("serial clocks resolve to %v, want one fixed-clock", targets)
	}
	if rtc := got["/rtc@9020000"]["clocks"]; !bytes.Equal(rtc, clocks[:4]) {
		t.Errorf("rtc clocks % x, serial's % x: the PrimeCells should share the APB clock", rtc, clocks[:4])
	}
	n := 0
	for path := range got {
		if strings.HasPrefix(path, "/apb-pclk") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d apb-pclk nodes, want 1", n)
	}
	stdout := strings.TrimSuffix(string(got["/chosen"]["stdout-path"]), "\x00")
	if !bytes.Equal(got[stdout]["compatible"], strsOf("arm,pl011", "arm,primecell")) {
		t.Errorf("stdout-path %q does not lead to the PL011", stdout)
	}
	for path := range got {
		if strings.HasPrefix(path, "/uart") {
			t.Errorf("an 8250 node %s beside the PL011", path)
		}
	}

	d.Devices[0] = PL011Node{Base: 0x0900_0000, Size: 0x800, SPI: 1}.Node()
	if _, err := d.Build(); err == nil || !strings.Contains(err.Error(), "PL011 region is 0x800 bytes") {
		t.Errorf("Build with a PL011 too small for its ids: %v", err)
	}
}
