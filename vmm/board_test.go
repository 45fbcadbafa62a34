package vmm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mvm-dev/mvm/internal/fdt/fdttest"
)

// boardCase is one configuration of the board whose DTB is pinned.
type boardCase struct {
	file   string // golden DTB in testdata
	cfg    Config
	cpus   int
	initrd uint64 // initrd size; 0 = none
	virtio int    // number of virtio-mmio transports
}

// boardCases: mvm run's defaults (1 vCPU, 512M, the 8250 console
// command line, the default virtio-rng), and a larger machine with two
// RAM regions, 4 vCPUs, the PMU, an initrd and two virtio devices.
func boardCases() []boardCase {
	const defaultCmdline = "console=ttyS0 earlycon=uart8250,mmio,0x09000000"
	return []boardCase{
		{file: "board-default.dtb", cfg: Config{CPUs: 1, Memory: 512 << 20, Cmdline: defaultCmdline}, cpus: 1, virtio: 1},
		{file: "board-4cpu-pmu.dtb", cfg: Config{CPUs: 4, Memory: 3 << 30, Cmdline: defaultCmdline + " quiet", PMU: true},
			cpus: 4, initrd: 5<<20 + 123, virtio: 2},
	}
}

// buildBoard builds the DTB of c the way New does, without KVM.
func buildBoard(t *testing.T, c boardCase) []byte {
	t.Helper()
	var mpidrs []uint64
	for i := 0; i < c.cpus; i++ {
		mpidrs = append(mpidrs, kvmDefaultMPIDR(i))
	}
	var initrd Region
	if c.initrd > 0 {
		p, err := Place(RAMRegions(c.cfg.Memory)[0], 0, 40<<20, c.initrd)
		if err != nil {
			t.Fatal(err)
		}
		initrd = p.Initrd
	}
	var virtio []VirtioNode
	for i := 0; i < c.virtio; i++ {
		virtio = append(virtio, VirtioNode{Base: VirtioBase + uint64(i)*VirtioSlotSize, Size: VirtioSlotSize, SPI: uint32(VirtioSPIFirst + i)})
	}
	dt := boardTree(&c.cfg, mpidrs, initrd, virtio)
	blob, err := dt.Build()
	if err != nil {
		t.Fatalf("%s: Build: %v", c.file, err)
	}
	return blob
}

// TestBoardTreeUnchanged: the DTBs of these configurations are byte for
// byte the ones the central device-tree builder made before each device
// wrote its own node (testdata/board-*.dtb were written by that builder,
// commit "board: the platform's device tree as a pure function ...").
// A change to the default tree must be deliberate: regenerate with
// MVM_UPDATE_GOLDEN=1 and say why in the commit.
func TestBoardTreeUnchanged(t *testing.T) {
	for _, c := range boardCases() {
		t.Run(c.file, func(t *testing.T) {
			blob := buildBoard(t, c)
			golden := filepath.Join("testdata", c.file)
			if os.Getenv("MVM_UPDATE_GOLDEN") == "1" {
				if err := os.WriteFile(golden, blob, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(blob, want) {
				return
			}
			// Show the difference as DTS.
			dir := t.TempDir()
			got := filepath.Join(dir, "got.dtb")
			if err := os.WriteFile(got, blob, 0o644); err != nil {
				t.Fatal(err)
			}
			dtc := fdttest.DTC(t)
			a, _ := exec.Command(dtc, "-I", "dtb", "-O", "dts", golden).Output()
			b, _ := exec.Command(dtc, "-I", "dtb", "-O", "dts", got).Output()
			t.Errorf("DTB differs from %s (%d bytes, got %d)\nwant:\n%s\ngot:\n%s", golden, len(want), len(blob), a, b)
		})
	}
}

// With --serial pl011 the board's console is the PL011 at the UART's
// address and SPI, and nothing else in the tree changes: the tree is the
// default one with the uart node replaced.
func TestBoardTreePL011(t *testing.T) {
	c := boardCases()[0]
	def, _ := fdttest.Decompile(t, buildBoard(t, c))
	c.cfg.Serial = SerialPL011
	got, warnings := fdttest.Decompile(t, buildBoard(t, c))
	if warnings != "" {
		t.Errorf("dtc warns:\n%s", warnings)
	}
	if _, ok := got["/uart@9000000"]; ok {
		t.Errorf("--serial pl011 still has the 8250 node")
	}
	s, ok := got["/serial@9000000"]
	if !ok {
		t.Fatalf("no /serial@9000000")
	}
	if !bytes.Equal(s["reg"], def["/uart@9000000"]["reg"]) || !bytes.Equal(s["interrupts"], def["/uart@9000000"]["interrupts"]) {
		t.Errorf("PL011 reg % x interrupts % x, want the 8250's % x and % x", s["reg"], s["interrupts"], def["/uart@9000000"]["reg"], def["/uart@9000000"]["interrupts"])
	}
	if p := string(got["/chosen"]["stdout-path"]); p != "/serial@9000000\x00" {
		t.Errorf("stdout-path %q", p)
	}
	for path, props := range def {
		if path == "/uart@9000000" || path == "/chosen" {
			continue
		}
		g, ok := got[path]
		if !ok {
			t.Errorf("node %s missing with --serial pl011", path)
			continue
		}
		for name, v := range props {
			if !bytes.Equal(g[name], v) {
				t.Errorf("%s %s = % x, default % x", path, name, g[name], v)
			}
		}
	}
}
