//go:build linux && amd64

package kvmproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mvm-dev/mvm/exits/kvmstat"
	"github.com/mvm-dev/mvm/internal/kvm"
	"github.com/mvm-dev/mvm/internal/x86vm"
)

// holderHalts is how many HLT exits the holder's guest makes.
const holderHalts = 4

// init keeps the main goroutine on the main thread, so that the holder's
// named "vCPU" goroutine (which locks the thread it starts on) never runs
// on the thread group leader, whose name is the process's (/proc/PID/comm,
// which Name reads): it did once under a loaded make test ("fc_vcpu 0").
func init() { runtime.LockOSThread() }

func TestMain(m *testing.M) {
	x86vm.ServeHolder(holdVM)
	os.Exit(m.Run())
}

// holdVM makes the test binary an x86vm holder: another process that owns
// a real KVM VM on this host's /dev/kvm, as a VMM would. It runs a tiny
// guest to its end, names a thread as Firecracker names its vCPU 0 thread,
// prints what it did and keeps the VM until the test stops it.
func holdVM(string) error {
	vm, err := x86vm.New(x86vm.Program{Port: 0x10, Outs: 9, Halts: holderHalts}, x86vm.Options{})
	if err != nil {
		return err
	}
	defer vm.Close()
	res, err := vm.RunAll()
	if err != nil {
		return err
	}
	// Open a stats file and keep it, as QEMU does for each vCPU.
	stats, err := kvm.GetStatsFD(vm.VCPUFd())
	if err != nil {
		return err
	}
	defer stats.Close()
	tid := make(chan int)
	go func() {
		runtime.LockOSThread() // never unlocked: the named thread stays this goroutine's
		if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(unsafePtr("fc_vcpu 0"))), 0, 0, 0); err != nil {
			tid <- -1
			return
		}
		tid <- unix.Gettid()
		select {}
	}()
	fmt.Printf("READY %d %d %d %d %d %d\n", <-tid, vm.VMFd(), vm.VCPUFd(), stats.Fd(), res.Halts, res.Intr)
	x86vm.WaitForStop()
	return nil
}

type holder struct {
	*x86vm.Holder
	tid, vmFd, vcpuFd, statsFd, halts, intr int
}

func startHolder(t *testing.T) *holder {
	t.Helper()
	xh, line := x86vm.StartHolder(t, "1")
	h := &holder{Holder: xh}
	if _, err := fmt.Sscanf(line, "READY %d %d %d %d %d %d", &h.tid, &h.vmFd, &h.vcpuFd, &h.statsFd, &h.halts, &h.intr); err != nil {
		t.Fatalf("holder said %q", line)
	}
	return h
}

// TestForeignVM finds another process's VM and vCPU descriptors, copies
// them with pidfd_getfd, reads KVM's binary stats through the copy and
// finds the vCPU thread by its name.
func TestForeignVM(t *testing.T) {
	x86vm.NeedKVM(t)
	h := startHolder(t)
	if h.halts != holderHalts {
		t.Fatalf("holder's guest made %d HLT exits, want %d", h.halts, holderHalts)
	}
	p, err := Open(h.Cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	k, err := p.KVM()
	if err != nil {
		t.Fatal(err)
	}
	if len(k.VMs) != 1 || k.VMs[0].Num != h.vmFd {
		t.Errorf("VMs %+v, want one at fd %d", k.VMs, h.vmFd)
	}
	if len(k.VCPUs) != 1 || k.VCPUs[0].Num != h.vcpuFd || k.VCPUs[0].VCPU != 0 {
		t.Fatalf("vCPUs %+v, want vCPU 0 at fd %d", k.VCPUs, h.vcpuFd)
	}

	if len(k.VCPUStats) != 1 || k.VCPUStats[0].Num != h.statsFd || k.VCPUStats[0].VCPU != 0 {
		t.Fatalf("vCPU stats files %+v, want vCPU 0's at fd %d", k.VCPUStats, h.statsFd)
	}

	// KVM refuses ioctls on a VM or vCPU from any process but its
	// creator (EIO): a copied vCPU fd gives no stats file.
	f, err := p.CopyFD(k.VCPUs[0].Num)
	if err != nil {
		t.Fatal(err)
	}
	if sf, err := kvm.GetStatsFD(f.Fd()); !errors.Is(err, unix.EIO) {
		t.Errorf("KVM_GET_STATS_FD on a copied vCPU fd: %v, want EIO", err)
		if err == nil {
			sf.Close()
		}
	}
	f.Close()

	// The holder's own stats file, copied, reads fine.
	sf, err := p.CopyFD(k.VCPUStats[0].Num)
	if err != nil {
		t.Fatal(err)
	}
	layout, err := kvmstat.ParseStats(sf)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := layout.Read(sf)
	if err != nil {
		t.Fatal(err)
	}
	// Counters since the vCPU was created: every HLT is one halt_exits
	// (__kvm_emulate_halt, arch/x86/kvm/x86.c), every EINTR one
	// signal_exits.
	if v, _ := snap.Value("halt_exits"); v != uint64(h.halts) {
		t.Errorf("halt_exits through the copied fd = %d, the holder saw %d HLT exits", v, h.halts)
	}
	if v, _ := snap.Value("signal_exits"); v != uint64(h.intr) {
		t.Errorf("signal_exits through the copied fd = %d, the holder saw %d EINTR", v, h.intr)
	}

	vt, err := p.MapVCPUs(context.Background(), k, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(vt) != 1 || vt[0].TID != h.tid || vt[0].VCPU != 0 || vt[0].How != "name" {
		t.Errorf("vCPU threads %+v, want vCPU 0 on thread %d found by name", vt, h.tid)
	}
	if name, err := p.Name(); err != nil || name != "kvmproc.test" {
		t.Errorf("Name() = %q, %v", name, err)
	}

	// The holder exits: everything says the process is gone.
	h.Stop()
	if !p.Exited() {
		t.Error("Exited() false after the holder exited")
	}
	if _, err := p.KVM(); !errors.Is(err, ErrGone) {
		t.Errorf("KVM() of an exited process: %v, want ErrGone", err)
	}
	if _, err := p.CopyFD(h.vcpuFd); !errors.Is(err, ErrGone) {
		t.Errorf("CopyFD of an exited process: %v, want ErrGone", err)
	}
	if _, err := Open(h.Cmd.Process.Pid); !errors.Is(err, ErrGone) {
		t.Errorf("Open of a reaped PID: %v, want ErrGone", err)
	}
	// The copied stats file outlives the process and keeps its last
	// values.
	last, err := layout.Read(sf)
	if err != nil {
		t.Errorf("stats after the holder exited: %v", err)
	} else if v, _ := last.Value("halt_exits"); v != uint64(h.halts) {
		t.Errorf("halt_exits after exit = %d, want %d", v, h.halts)
	}
	sf.Close()
}

// TestNotKVM: a process without a VM is told apart from one that is gone.
func TestNotKVM(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	p, err := Open(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.KVM(); !errors.Is(err, ErrNotKVM) {
		t.Errorf("KVM() of sleep: %v, want ErrNotKVM", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := p.WaitExit(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitExit of a running sleep: %v", err)
	}
	cmd.Process.Kill()
	if err := p.WaitExit(context.Background()); err != nil {
		t.Errorf("WaitExit after kill: %v", err)
	}
	if _, err := Open(0); !errors.Is(err, ErrGone) {
		t.Errorf("Open(0): %v", err)
	}
}

func unsafePtr(s string) *byte {
	b, _ := unix.BytePtrFromString(s)
	return b
}
