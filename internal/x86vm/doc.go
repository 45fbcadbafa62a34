// Package x86vm runs a tiny real x86 guest on the host's /dev/kvm so that
// host tests can check exit accounting (the KVM stats fd, the kvm_exit
// tracepoints) against exits whose number is known in advance. It is a test
// helper: mvm itself targets arm64 and imports it only from tests. It is
// built for linux/amd64 only; elsewhere the package is empty.
//
// The guest is a few bytes of 16-bit real-mode code: Outs `out dx, al` to
// Program.Port, then Halts `hlt`, then one `out` to DonePort, after which
// the helper stops running it. Without an in-kernel irqchip every `out` is a
// KVM_EXIT_IO and every `hlt` a KVM_EXIT_HLT to userspace (KVM_CAP_HLT).
//
// A holder (holder.go) is the test binary run again as another process
// that owns such a VM, for tests of code that looks at another VMM.
package x86vm
