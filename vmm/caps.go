//go:build linux

package vmm

import (
	"fmt"
	"os"
	"runtime"

	"github.com/mvm-dev/mvm/internal/kvm"
)

// HostCaps is what the host's KVM offers mvm (mvm caps).
type HostCaps struct {
	Host  string    `json:"host"`
	Items []HostCap `json:"capabilities"`
}

// HostCap is one capability.
type HostCap struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Value     string `json:"value,omitempty"`
	// Disables says what mvm cannot do without it.
	Disables string `json:"disables,omitempty"`
}

// ProbeHost checks /dev/kvm and every capability mvm uses. It never fails:
// what cannot be probed is reported unavailable with the reason.
func ProbeHost() HostCaps {
	hc := HostCaps{Host: runtime.GOOS + "/" + runtime.GOARCH}
	add := func(name string, ok bool, val, disables string) {
		hc.Items = append(hc.Items, HostCap{Name: name, Available: ok, Value: val, Disables: disables})
	}
	arm := runtime.GOARCH == "arm64"
	sys, err := kvm.Open()
	if err != nil {
		add("/dev/kvm", false, err.Error(), "every VM: mvm needs KVM")
		add("tracefs kvm events", tracefsKVM(), "", "the tracepoint source of --profile")
		return hc
	}
	defer sys.Close()
	add("/dev/kvm", true, fmt.Sprintf("API version %d", kvm.StableAPIVersion), "")
	add("arm64 host", arm, runtime.GOARCH, "running guests: mvm boots arm64 guests on arm64 KVM only")
	max := kvm.CheckExtension(sys, kvm.CapMaxVCPUs)
	add("max vCPUs", max > 0, fmt.Sprint(max), "vCPU count checks (KVM_CAP_MAX_VCPUS)")
	ipa := kvm.CheckExtension(sys, kvm.CapARMVMIPASize)
	add("IPA size", arm && ipa > 0, ipaText(ipa), "guest physical address size above the 40-bit default")
	stats := kvm.CheckExtension(sys, kvm.CapBinaryStatsFD) > 0
	add("binary stats fd", stats, "", "KVM's own per-vCPU counters in --profile (Linux 5.14+)")
	add("tracefs kvm events", tracefsKVM(), "", "the tracepoint source of --profile (needs tracefs and kvm:kvm_exit)")

	vm, err := kvm.CreateVM(sys)
	if err != nil {
		add("create VM", false, err.Error(), "every VM")
		return hc
	}
	defer vm.Close()
	v3 := arm && kvm.CanCreateDevice(vm, kvm.DevTypeARMVGICv3)
	v2 := arm && kvm.CanCreateDevice(vm, kvm.DevTypeARMVGICv2)
	add("vGICv3", v3, "", "every VM: mvm's platform uses an in-kernel GICv3")
	add("vGICv2", v2, "", "nothing (mvm uses GICv3)")
	filter := arm && kvm.HasSMCCCFilter(vm)
	add("SMCCC filter", filter, "", "PSCI in userspace (--psci user) and mvm's CPU_ON timeline; KVM answers PSCI instead (Linux 6.4+)")
	psci02 := arm && kvm.CheckExtension(sys, kvm.CapARMPSCI02) > 0
	add("in-kernel PSCI 0.2+", psci02, "", "--psci kernel")
	pmu := arm && checkPMU(func(c kvm.Cap) int { return kvm.CheckExtension(sys, c) }) == nil
	add("guest PMU (PMUv3)", pmu, "", "--pmu (KVM_CAP_ARM_PMU_V3: the host needs a PMUv3 that its perf drives)")
	return hc
}

func ipaText(bits int) string {
	if bits <= 0 {
		return ""
	}
	return fmt.Sprintf("%d bits", bits)
}

// tracefsKVM reports whether the kvm:kvm_exit tracepoint is visible.
func tracefsKVM() bool {
	for _, p := range []string{"/sys/kernel/tracing/events/kvm/kvm_exit", "/sys/kernel/debug/tracing/events/kvm/kvm_exit"} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}
