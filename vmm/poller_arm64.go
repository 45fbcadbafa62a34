//go:build linux && arm64

package vmm

import "time"

// keepPoller keeps one idle thread of the Go runtime waiting in its network
// poller for as long as the VM runs, and returns the function that lets it
// go. Without it every userspace exit of a vCPU that has been in the guest
// a while costs a thread wake-up more than it must: the runtime's sysmon
// takes back the P of a thread that stays in a system call (KVM_RUN) for
// long, and when that P is the last one running and no thread waits in the
// poller, it wakes an idle thread just to poll (handoffp in Go's
// runtime/proc.go: "If this is the last running P and nobody is polling
// network"), which finds nothing and sleeps again. An idle thread waits in
// the poller, instead of on its futex, only while a goroutine waits on a
// pollable file or a timer is pending (findRunnable); mvm has neither
// during most runs, so a timer that never fires is kept pending. In the
// instruction-time lab this is one thread wake-up less per CPU_ON, about
// 3% of an 8-vCPU guest's secondary bring-up (docs/boot-phases.md).
func keepPoller() (release func()) {
	t := time.AfterFunc(neverFires, func() {})
	return func() { t.Stop() }
}

// neverFires is longer than any VM runs (about 146 years).
const neverFires = time.Duration(1 << 62)
