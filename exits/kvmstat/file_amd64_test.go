//go:build linux && amd64

package kvmstat

import (
	"os"
	"strings"
	"testing"

	"github.com/mvm-dev/mvm/internal/kvm"
	"github.com/mvm-dev/mvm/internal/x86vm"
)

// TestStatsFDTinyVM reads the binary stats of a real tiny x86 VM on this
// machine's /dev/kvm around a run with a known number of exits. It skips
// on a host without /dev/kvm (x86vm.NeedKVM) and fails on any other error: the stats fd needs no privilege beyond
// the VM fd.
func TestStatsFDTinyVM(t *testing.T) {
	x86vm.NeedKVM(t)
	const outs, halts = 37, 5
	backend, err := x86vm.DetectBackend()
	if err != nil {
		t.Fatal(err)
	}
	vm, err := x86vm.New(x86vm.Program{Port: 0x10, Outs: outs, Halts: halts}, x86vm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Close()

	vcpu, err := Open(vm.VCPUFd())
	if err != nil {
		t.Fatal(err)
	}
	defer vcpu.Close()
	vmst, err := Open(vm.VMFd())
	if err != nil {
		t.Fatal(err)
	}
	defer vmst.Close()

	if !strings.HasPrefix(vcpu.Layout.ID, "kvm-") || !strings.HasSuffix(vcpu.Layout.ID, "/vcpu-0") {
		t.Errorf("vCPU stats id %q", vcpu.Layout.ID)
	}
	if !strings.HasPrefix(vmst.Layout.ID, "kvm-") || strings.Contains(vmst.Layout.ID, "/") {
		t.Errorf("VM stats id %q", vmst.Layout.ID)
	}
	// Generic and x86 per-vCPU stats (virt/kvm/kvm_main.c and
	// arch/x86/kvm/x86.c kvm_vcpu_stats_desc), whatever the vendor module.
	for _, name := range []string{"exits", "io_exits", "halt_exits", "signal_exits", "mmio_exits", "halt_wait_ns", "halt_wait_hist"} {
		if _, ok := vcpu.Layout.Index(name); !ok {
			t.Errorf("vCPU stats lack %q", name)
		}
	}
	if i, ok := vcpu.Layout.Index("halt_wait_hist"); ok && vcpu.Layout.Descs[i].Type() != StatLogHist {
		t.Errorf("halt_wait_hist is %v", vcpu.Layout.Descs[i].Type())
	}
	if _, ok := vmst.Layout.Index("remote_tlb_flush"); !ok {
		t.Error("VM stats lack remote_tlb_flush")
	}

	tid, err := vm.Thread()
	if err != nil {
		t.Fatal(err)
	}
	before, err := vcpu.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	vmBefore, err := vmst.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	res, err := vm.RunAll()
	if err != nil {
		t.Fatalf("guest on thread %d: %v", tid, err)
	}
	after, err := vcpu.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	vmAfter, err := vmst.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	deltas, err := Delta(before, after)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Delta(vmBefore, vmAfter); err != nil {
		t.Fatal(err)
	}
	d := map[string]uint64{}
	for _, sd := range deltas {
		if !sd.Desc.IsHistogram() {
			d[sd.Desc.Name] = sd.Value()
		}
	}
	t.Logf("backend %s, userspace %+v, stats deltas: exits %d io_exits %d halt_exits %d signal_exits %d insn_emulation %d",
		backend, res, d["exits"], d["io_exits"], d["halt_exits"], d["signal_exits"], d["insn_emulation"])

	// halt_exits is counted by common x86 code (__kvm_emulate_halt in
	// arch/x86/kvm/x86.c) once per HLT, whichever vendor module trapped
	// or emulated it; without an in-kernel LAPIC each one then exits to
	// userspace as KVM_EXIT_HLT.
	if d["halt_exits"] != halts {
		t.Errorf("halt_exits delta %d, want %d", d["halt_exits"], halts)
	}
	// signal_exits counts the KVM_RUNs that returned EINTR because a
	// signal was pending (x86.c); the helper never sets immediate_exit,
	// so that is every EINTR it saw.
	if d["signal_exits"] != uint64(res.Intr) {
		t.Errorf("signal_exits delta %d, userspace saw %d EINTR", d["signal_exits"], res.Intr)
	}
	// Every userspace exit follows at least one counted guest exit.
	if min := uint64(outs + 1 + halts); d["exits"] < min {
		t.Errorf("exits delta %d < %d userspace I/O and HLT exits", d["exits"], min)
	}
	switch backend {
	case x86vm.BackendVMX, x86vm.BackendSVM:
		// Every `out` (the Outs and the one to the done port) is an I/O
		// intercept, counted in handle_io / io_interception.
		if d["io_exits"] != outs+1 {
			t.Errorf("%s: io_exits delta %d, want %d", backend, d["io_exits"], outs+1)
		}
	case x86vm.BackendPVM:
		// PVM emulates the `out`s in the instruction emulator: no I/O
		// intercept handler, no io_exits.
		if d["io_exits"] != 0 {
			t.Errorf("pvm: io_exits delta %d, want 0 (PVM emulates port I/O)", d["io_exits"])
		}
	}

	for _, r := range Rows("0", deltas) {
		if r.Delta != 0 {
			t.Logf("%s %s %s", r.Name, r.Type, r.Pretty)
		}
	}
}

func TestGetStatsFDErrors(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := kvm.GetStatsFD(f.Fd()); err == nil {
		t.Fatal("KVM_GET_STATS_FD on /dev/null succeeded")
	}
	if _, err := Open(^uintptr(0)); err == nil {
		t.Fatal("Open on an invalid fd succeeded")
	}
}
