//go:build linux && arm64

package vmm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mvm-dev/mvm/internal/kvm"
	"github.com/mvm-dev/mvm/runsummary"
)

// mmioExits is MMIO_COUNT in guest/payloads/mmio.s.
const mmioExits = 5000

func mmioPayload(b *testing.B) string {
	dir := os.Getenv("MVM_GUEST_DIR")
	if dir == "" {
		b.Fatal("MVM_GUEST_DIR is not set: run with 'make bench'")
	}
	return filepath.Join(dir, "mmio.bin")
}

// BenchmarkMMIOExit compares a userspace MMIO exit through mvm's vCPU loop
// and device bus (vmm.New + Run, with KVM's PSCI so both sides see the same
// exits) with a bare KVM_RUN loop that only re-enters, on the same payload
// in the same run, each timed from its first entry into the guest to the
// guest's SYSTEM_OFF. ns/op is per exit; the ratio is mvm/bare.
func BenchmarkMMIOExit(b *testing.B) {
	payload := mmioPayload(b)
	var mvmNS, bareNS float64
	for i := 0; i < b.N; i++ {
		mvmNS += timeMVM(b, payload)
		bareNS += timeBare(b, payload)
	}
	n := float64(b.N * mmioExits)
	b.ReportMetric(mvmNS/n, "mvm-ns/exit")
	b.ReportMetric(bareNS/n, "bare-ns/exit")
	b.ReportMetric(mvmNS/bareNS, "mvm/bare")
	b.ReportMetric(0, "ns/op")
}

func timeMVM(b *testing.B, payload string) float64 {
	m, err := New(Config{Kernel: payload, CPUs: 1, Memory: 64 << 20, PSCI: runsummary.PSCIKernel, OnReset: ResetExit})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	res, err := m.Run(context.Background())
	if err != nil || res.Exit != runsummary.ExitPowerOff {
		b.Fatalf("mvm run: %v %v", res.Exit, err)
	}
	// From just before the vCPU's first KVM_RUN to the VM's exit (the
	// SYSTEM_OFF exit handled and the vCPU joined), as timeBare times it:
	// Run's own start-up and its memory and profile read-out after the
	// exit are once per run, not per MMIO round trip.
	return float64(res.Timeline.End.Sub(res.Timeline.FirstRun))
}

// timeBare runs the payload on the same VM configuration as mvm's (RAM at
// the same place, one vCPU, an in-kernel vGICv3: its state is switched on
// every entry and exit, so leaving it out would flatter the bare loop) but
// with no devices, no accounting and no dispatch: every MMIO exit is
// re-entered at once.
func timeBare(b *testing.B, payload string) float64 {
	// Like mvm, create and run the vCPU on one locked thread: KVM_RUN from
	// a different thread each time makes KVM rebind the vCPU (and wait
	// for RCU), which would make the bare loop look slow.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	bv := newBareVM(b, payload)
	defer bv.close()
	t0 := time.Now()
	bv.runToOff(b)
	return float64(time.Since(t0))
}

// bareVM is the bare loop's VM: RAM with the payload, one vCPU that has
// done its first KVM_RUN (immediate exit) and starts at the payload, and
// an in-kernel vGICv3.
type bareVM struct {
	cpu   *os.File
	run   *kvm.Run
	init  kvm.VCPUInit
	close func()
}

// runToOff runs the vCPU, re-entering at once after every MMIO exit, until
// the guest's SYSTEM_OFF, and returns the number of MMIO exits.
func (bv *bareVM) runToOff(b *testing.B) int {
	exits := 0
	for {
		if err := kvm.RunVCPU(bv.cpu); err != nil {
			if err == unix.EINTR {
				continue
			}
			b.Fatal(err)
		}
		switch bv.run.ExitReason() {
		case kvm.ExitMMIO:
			exits++
		case kvm.ExitSystemEvent:
			return exits
		default:
			b.Fatalf("bare loop: unexpected exit %d", bv.run.ExitReason())
		}
	}
}

// newBareVM builds a bareVM; call it on the thread that will run the vCPU.
func newBareVM(b *testing.B, payload string) *bareVM {
	var closers []func()
	bv := &bareVM{close: func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}}
	ok := false
	defer func() {
		if !ok {
			bv.close()
		}
	}()
	code, err := os.ReadFile(payload)
	if err != nil {
		b.Fatal(err)
	}
	sys, err := kvm.Open()
	if err != nil {
		b.Fatal(err)
	}
	closers = append(closers, func() { sys.Close() })
	vm, err := kvm.CreateVM(sys)
	if err != nil {
		b.Fatal(err)
	}
	closers = append(closers, func() { vm.Close() })
	mem, err := unix.Mmap(-1, 0, 64<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		b.Fatal(err)
	}
	closers = append(closers, func() { unix.Munmap(mem) })
	copy(mem, code)
	if err := kvm.SetUserMemoryRegion(vm, 0, RAMBase, 64<<20, uint64(uintptrOf(mem))); err != nil {
		b.Fatal(err)
	}
	init, err := kvm.PreferredTarget(vm)
	if err != nil {
		b.Fatal(err)
	}
	init.Features[0] |= 1 << kvm.FeaturePSCI02
	cpu, err := kvm.CreateVCPU(vm, 0)
	if err != nil {
		b.Fatal(err)
	}
	closers = append(closers, func() { cpu.Close() })
	if err := kvm.InitVCPU(cpu, &init); err != nil {
		b.Fatal(err)
	}
	gic, err := kvm.CreateDevice(vm, kvm.DevTypeARMVGICv3)
	if err != nil {
		b.Fatal(err)
	}
	closers = append(closers, func() { gic.Close() })
	dist, redist, nr := uint64(GICDistBase), uint64(GICRedistBase), uint32(NrIRQs)
	for _, a := range []struct {
		group uint32
		attr  uint64
		val   unsafe.Pointer
	}{
		{kvm.VGICGroupAddr, kvm.VGICv3AddrDist, unsafe.Pointer(&dist)},
		{kvm.VGICGroupAddr, kvm.VGICv3AddrRedist, unsafe.Pointer(&redist)},
		{kvm.VGICGroupNrIRQ, 0, unsafe.Pointer(&nr)},
		{kvm.VGICGroupCtrl, kvm.VGICCtrlInit, nil},
	} {
		if err := kvm.SetDeviceAttr(gic, a.group, a.attr, a.val); err != nil {
			b.Fatal(err)
		}
	}
	run, err := kvm.MapRun(sys, cpu)
	if err != nil {
		b.Fatal(err)
	}
	closers = append(closers, func() { run.Unmap() })
	// mvm does its first KVM_RUN (KVM's one-off set-up) before the guest
	// starts; do the same outside the timed loop.
	run.SetImmediateExit(true)
	kvm.RunVCPU(cpu)
	run.SetImmediateExit(false)
	kvm.SetOneReg(cpu, kvm.RegPC, RAMBase)
	kvm.SetOneReg(cpu, kvm.RegPSTATE, kvm.PSTATEBoot)
	bv.cpu, bv.run, bv.init = cpu, run, init
	ok = true
	return bv
}

// BenchmarkVCPUOps times, one at a time, what PSCI in mvm adds to a CPU_ON
// and what it saves, on a vCPU that has run (the bare loop's VM, after a
// full run of mmio.bin):
//
//   - GetOneReg, SetOneReg: one KVM_GET/SET_ONE_REG (the caller reads X1-X3
//     and writes X0; the target's PC is written);
//   - UserExit: one MMIO exit to userspace and back into the guest (the
//     caller's CPU_ON exit to mvm, which KVM's in-kernel PSCI does not take);
//   - VCPUInit: KVM_ARM_VCPU_INIT of a vCPU that has run, whose reset is the
//     one KVM's in-kernel CPU_ON does on the target's path (kvm_reset_vcpu)
//     and mvm does while the vCPU is parked.
//
// ns/op is per operation; docs/boot-phases.md adds them up.
func BenchmarkVCPUOps(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	payload := mmioPayload(b)
	bv := newBareVM(b, payload)
	defer bv.close()
	// Run the payload once so the vCPU has run and its pages are mapped.
	if exits := bv.runToOff(b); exits != mmioExits {
		b.Fatalf("mmio.bin made %d MMIO exits, want %d", exits, mmioExits)
	}
	b.Run("GetOneReg", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := kvm.GetOneReg(bv.cpu, kvm.RegX(1)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("SetOneReg", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := kvm.SetOneReg(bv.cpu, kvm.RegX(0), uint64(i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The raw-call variants the vCPU's own thread uses on the CPU_ON path
	// (the caller's X1-X3 and X0, the target's PC): the same ioctls
	// without the runtime's entersyscall/exitsyscall. First, a failed
	// call must come back as its errno: a system register KVM does not
	// expose (IMPLEMENTATION DEFINED space, op0=3 CRn=15) is ENOENT
	// (arch/arm64/kvm/sys_regs.c, kvm_arm_sys_reg_get_reg).
	fd := bv.cpu.Fd()
	bad := kvm.SysReg(3, 0, 15, 15, 7)
	if v, err := kvm.GetOneRegOwn(fd, bad); !errors.Is(err, unix.ENOENT) {
		b.Fatalf("GetOneRegOwn of S3_0_C15_C15_7 = %#x, %v; want ENOENT", v, err)
	}
	if err := kvm.SetOneRegOwn(fd, bad, 1); !errors.Is(err, unix.ENOENT) {
		b.Fatalf("SetOneRegOwn of S3_0_C15_C15_7 = %v; want ENOENT", err)
	}
	b.Run("GetOneRegOwn", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := kvm.GetOneRegOwn(fd, kvm.RegX(1)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("SetOneRegOwn", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := kvm.SetOneRegOwn(fd, kvm.RegX(0), uint64(i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("VCPUInit", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := kvm.InitVCPU(bv.cpu, &bv.init); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("UserExit", func(b *testing.B) {
		// Whole runs of the payload (mmioExits exits each), until b.N
		// exits; timed per exit, without the re-init between runs.
		var n int
		var d time.Duration
		for n < b.N {
			if err := kvm.InitVCPU(bv.cpu, &bv.init); err != nil {
				b.Fatal(err)
			}
			if err := kvm.SetOneReg(bv.cpu, kvm.RegPC, RAMBase); err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			n += bv.runToOff(b)
			d += time.Since(t0)
		}
		b.ReportMetric(float64(d)/float64(n), "ns/exit")
		b.ReportMetric(0, "ns/op")
	})
}
