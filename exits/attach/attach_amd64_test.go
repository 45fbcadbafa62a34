//go:build linux && amd64

package attach

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/internal/kvm"
	"github.com/mvm-dev/mvm/internal/x86vm"
)

// holderHalts is how many HLT exits the holder's guest makes.
const holderHalts = 6

func TestMain(m *testing.M) {
	x86vm.ServeHolder(holdVM)
	os.Exit(m.Run())
}

// holdVM makes the test binary a tiny VMM (an x86vm holder): it creates a
// VM on this host's /dev/kvm, opens its vCPU's stats file (as QEMU does),
// runs a guest with holderHalts HLT exits and then waits (mode "wait":
// until the test stops it; else 300 ms) before it exits.
func holdVM(mode string) error {
	vm, err := x86vm.New(x86vm.Program{Port: 0x10, Outs: 3, Halts: holderHalts}, x86vm.Options{})
	if err != nil {
		return err
	}
	defer vm.Close()
	stats, err := kvm.GetStatsFD(vm.VCPUFd())
	if err != nil {
		return err
	}
	defer stats.Close()
	// Give a profiler polling every 20 ms time to copy the stats file
	// before the guest runs, so none of its exits is uncounted.
	time.Sleep(200 * time.Millisecond)
	if _, err := vm.RunAll(); err != nil {
		return err
	}
	fmt.Println("RAN")
	if mode == "wait" {
		x86vm.WaitForStop()
		return nil
	}
	time.Sleep(300 * time.Millisecond)
	return nil
}

func statTotal(t *testing.T, rep *exits.Report, name string) (uint64, bool) {
	t.Helper()
	for _, r := range rep.KVMStats {
		if r.Name == name && r.VCPU == "0" {
			return r.Delta, true
		}
	}
	return 0, false
}

func sourceOf(rep *exits.Report, name string) exits.SourceStatus {
	for _, s := range rep.Sources {
		if s.Name == name {
			return s
		}
	}
	return exits.SourceStatus{}
}

// TestCommandStatsFromCreation profiles a command that creates a VM after
// it starts: its stats file is found and copied while it runs, counted from
// the vCPU's creation, and read after the command has exited.
func TestCommandStatsFromCreation(t *testing.T) {
	x86vm.NeedKVM(t)
	t.Setenv(x86vm.HolderEnv("exit"))
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	res, err := Run(context.Background(), Config{
		Command: []string{os.Args[0], "-test.run=^$"},
		Stdin:   devnull, Stdout: devnull,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Exited || res.State == nil || res.State.ExitCode() != 0 {
		t.Fatalf("command: exited %v, state %v", res.Exited, res.State)
	}
	if s := sourceOf(res.Report, exits.SourceKVMStats); !s.Used {
		t.Fatalf("kvm_stats unused: %s", s.Reason)
	}
	if v, ok := statTotal(t, res.Report, "halt_exits"); !ok || v != holderHalts {
		t.Errorf("vCPU 0 halt_exits %d (found %v), the guest made %d HLT exits", v, ok, holderHalts)
	}
	if s := sourceOf(res.Report, exits.SourceUserspace); s.Used {
		t.Error("userspace source claimed for another VMM")
	}
}

// TestPIDDetaches attaches to a running VMM for a while, counts stats from
// then on (the guest already finished: no new HLTs) and leaves it running.
func TestPIDDetaches(t *testing.T) {
	x86vm.NeedKVM(t)
	h, line := x86vm.StartHolder(t, "wait")
	if line != "RAN" {
		t.Fatalf("holder said %q", line)
	}
	res, err := Run(context.Background(), Config{PID: h.Cmd.Process.Pid, Duration: 200 * time.Millisecond, Sources: []string{exits.SourceKVMStats}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Exited {
		t.Error("Run says the holder exited")
	}
	if v, ok := statTotal(t, res.Report, "halt_exits"); !ok || v != 0 {
		t.Errorf("halt_exits after attaching = %d (found %v), want 0", v, ok)
	}
	if s := sourceOf(res.Report, exits.SourceTracepoint); s.Used || s.Reason == "" {
		t.Errorf("tracepoint source %+v, want not requested", s)
	}
	// Still running and still answering.
	if err := h.Cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("holder gone after detach: %v", err)
	}
}
