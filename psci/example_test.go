package psci_test

import (
	"fmt"

	"github.com/mvm-dev/mvm/psci"
)

// The CPU_ON -> Started handshake and CPU_OFF, as a VMM's vCPU loops drive
// them (here in one goroutine; in mvm each vCPU has its own).
func Example() {
	m, err := psci.New(psci.Config{
		MPIDRs:           []uint64{0x8000_0000, 0x8000_0001}, // read back from MPIDR_EL1
		ValidEntry:       func(a uint64) bool { return a >= 0x4000_0000 && a < 0x8000_0000 },
		ExternalFeatures: []uint32{psci.SMCCCVersionFID},
	})
	if err != nil {
		panic(err)
	}
	mailbox := make(chan psci.Result, 1) // vCPU 1's start mailbox

	// vCPU 0 exits with HVC64 CPU_ON(target 1, entry, context_id).
	r, _ := m.Handle(0, psci.FnCPUOn64, 1, 0x4008_0000, 0xc0ffee)
	fmt.Println(psci.Name(psci.FnCPUOn64), psci.Status(int32(r.X0)), r.Action, r.Target)
	mailbox <- r // then write r.X0 to vCPU 0 and re-enter it

	// A second CPU_ON before vCPU 1 runs.
	r, _ = m.Handle(0, psci.FnCPUOn64, 1, 0x4008_0000, 0)
	fmt.Println("again:", psci.Status(int32(r.X0)))

	// vCPU 1's goroutine: receive, set PC/X0/PSTATE, Started, KVM_RUN.
	start := <-mailbox
	fmt.Printf("vCPU %d: PC=%#x X0=%#x\n", start.Target, start.Entry, start.ContextID)
	if err := m.Started(1); err != nil {
		panic(err)
	}
	st, _ := m.State(1)
	fmt.Println("vCPU 1:", st)

	// vCPU 1 calls CPU_OFF: park it, do not re-enter.
	r, _ = m.Handle(1, psci.FnCPUOff, 0, 0, 0)
	r2, _ := m.Handle(0, psci.FnAffinityInfo64, 1, 0, 0)
	fmt.Println(r.Action, "-> AFFINITY_INFO:", psci.State(r2.X0))
	// Output:
	// CPU_ON SUCCESS start_cpu 1
	// again: ON_PENDING
	// vCPU 1: PC=0x40080000 X0=0xc0ffee
	// vCPU 1: ON
	// cpu_off -> AFFINITY_INFO: OFF
}
