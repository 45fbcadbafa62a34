//go:build linux && arm64

package vmm

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	hkvm "github.com/c35s/hype/kvm"
	"golang.org/x/sys/unix"

	"github.com/mvm-dev/mvm/internal/kvm"
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
	m, err := New(Config{Kernel: payload, CPUs: 1, Memory: 64 << 20, PSCI: PSCIKernel, OnReset: ResetExit})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	res, err := m.Run(context.Background())
	if err != nil || res.Exit != ExitPowerOff {
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
	code, err := os.ReadFile(payload)
	if err != nil {
		b.Fatal(err)
	}
	sys, err := kvm.Open()
	if err != nil {
		b.Fatal(err)
	}
	defer sys.Close()
	vm, err := hkvm.CreateVM(sys)
	if err != nil {
		b.Fatal(err)
	}
	defer vm.Close()
	mem, err := unix.Mmap(-1, 0, 64<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(mem)
	copy(mem, code)
	if err := hkvm.SetUserMemoryRegion(vm, &hkvm.UserspaceMemoryRegion{GuestPhysAddr: RAMBase, MemorySize: 64 << 20, UserspaceAddr: uint64(uintptrOf(mem))}); err != nil {
		b.Fatal(err)
	}
	init, err := kvm.PreferredTarget(vm.File)
	if err != nil {
		b.Fatal(err)
	}
	init.Features[0] |= 1 << kvm.FeaturePSCI02
	cpu, err := hkvm.CreateVCPU(vm, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer cpu.Close()
	if err := kvm.InitVCPU(cpu.File, &init); err != nil {
		b.Fatal(err)
	}
	gic, err := kvm.CreateDevice(vm.File, kvm.DevTypeARMVGICv3)
	if err != nil {
		b.Fatal(err)
	}
	defer gic.Close()
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
	run, err := kvm.MapRun(sys, cpu.File)
	if err != nil {
		b.Fatal(err)
	}
	defer run.Unmap()
	// mvm does its first KVM_RUN (KVM's one-off set-up) before the guest
	// starts; do the same outside the timed loop.
	run.SetImmediateExit(true)
	hkvm.Run(cpu)
	run.SetImmediateExit(false)
	kvm.SetOneReg(cpu.File, kvm.RegPC, RAMBase)
	kvm.SetOneReg(cpu.File, kvm.RegPSTATE, kvm.PSTATEBoot)
	t0 := time.Now()
	for {
		if err := hkvm.Run(cpu); err != nil {
			if err == unix.EINTR {
				continue
			}
			b.Fatal(err)
		}
		switch run.ExitReason() {
		case kvm.ExitMMIO:
			continue
		case kvm.ExitSystemEvent:
			return float64(time.Since(t0))
		default:
			b.Fatalf("bare loop: unexpected exit %d", run.ExitReason())
		}
	}
}
