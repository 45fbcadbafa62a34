//go:build linux && amd64

package x86vm

import (
	"fmt"
	"os"
	"strings"
)

// Backend is the x86 KVM vendor module serving /dev/kvm. Exit accounting
// differs between them in ways the host tests must know:
//
//   - VMX (kvm_intel) and SVM (kvm_amd) trap `out` with an I/O intercept
//     whose handlers (handle_io in arch/x86/kvm/vmx/vmx.c, io_interception
//     in arch/x86/kvm/svm/svm.c) count io_exits, and they emit
//     kvm:kvm_entry/kvm:kvm_exit on every guest entry and exit.
//   - PVM (kvm_pvm, the "Pagetable-based Virtual Machine" out-of-tree
//     backend that runs guests without VMX/SVM) emulates port I/O in KVM's
//     instruction emulator and never goes through those handlers, so
//     io_exits stays 0.
type Backend string

// Known backends.
const (
	BackendVMX Backend = "vmx"
	BackendSVM Backend = "svm"
	BackendPVM Backend = "pvm"
)

// DetectBackend reports the vendor module that is loaded (from
// /sys/module). It fails when none or several are.
func DetectBackend() (Backend, error) {
	var found []Backend
	for mod, b := range map[string]Backend{"kvm_intel": BackendVMX, "kvm_amd": BackendSVM, "kvm_pvm": BackendPVM} {
		if _, err := os.Stat("/sys/module/" + mod); err == nil {
			found = append(found, b)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("x86vm: no KVM vendor module (kvm_intel, kvm_amd, kvm_pvm) in /sys/module")
	}
	names := make([]string, len(found))
	for i, b := range found {
		names[i] = string(b)
	}
	return "", fmt.Errorf("x86vm: several KVM vendor modules loaded (%s): cannot tell which serves /dev/kvm", strings.Join(names, ", "))
}
