//go:build linux

package bpfagg

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf/btf"
)

// vcpuESR is where kvm_entry's program reads the last exit's ESR_EL2
// from the kernel's vCPU: the per-CPU variable kvm_running_vcpu (virt/kvm/
// kvm_main.c, set while the vCPU is loaded, so at kvm_entry it is the
// entering vCPU) and the offset of arch.fault.esr_el2 in struct kvm_vcpu,
// both from the kernel's BTF. The ESR is what kvm_handle_sys_reg's
// tracepoint reports (kvm_vcpu_get_esr, arch/arm64/kvm/sys_regs.c): read
// at the next kvm_entry, it keys a SYS64 exit without that detail event,
// one event fewer on the boot's commonest exit (docs/profile.md, "The
// floor").
type vcpuESR struct {
	// varID is kvm_running_vcpu's BTF type ID in vmlinux (0: not read).
	varID btf.TypeID
	// off is the byte offset of arch.fault.esr_el2 in struct kvm_vcpu.
	off uint32
	// vcpuID is struct kvm_vcpu's BTF type ID, castID the kfunc
	// bpf_rdonly_cast's: casting the vCPU pointer to the struct lets the
	// program load the ESR directly (a BPF_PROBE_MEM load, which the JIT
	// emits inline with an exception-table entry), where
	// bpf_probe_read_kernel is a helper call that in the lab costs about
	// what the kvm_handle_sys_reg event it replaces does. The verifier
	// turns the cast itself into a register move (kernel/bpf/verifier.c,
	// fixup_kfunc_call).
	vcpuID, castID btf.TypeID
}

// findVCPUESR looks kvm_running_vcpu and the ESR's offset up in the
// running kernel's BTF.
func findVCPUESR() (vcpuESR, error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return vcpuESR{}, fmt.Errorf("kernel BTF: %w", err)
	}
	v, id, err := typeNamed[*btf.Var](spec, "kvm_running_vcpu", "kvm_running_vcpu")
	if err != nil {
		return vcpuESR{}, err
	}
	if p, ok := btf.As[*btf.Pointer](v.Type); !ok || p.Target == nil {
		return vcpuESR{}, errors.New("kernel BTF: kvm_running_vcpu is not a pointer")
	}
	vcpu, vcpuID, err := typeNamed[*btf.Struct](spec, "kvm_vcpu", "struct kvm_vcpu")
	if err != nil {
		return vcpuESR{}, err
	}
	_, castID, err := typeNamed[*btf.Func](spec, "bpf_rdonly_cast", "kfunc bpf_rdonly_cast (Linux 6.2+)")
	if err != nil {
		return vcpuESR{}, err
	}
	off, size, err := memberOffset(vcpu, "arch", "fault", "esr_el2")
	if err != nil {
		return vcpuESR{}, fmt.Errorf("kernel BTF: struct kvm_vcpu: %w", err)
	}
	if off > 1<<15-8 {
		return vcpuESR{}, fmt.Errorf("kernel BTF: kvm_vcpu.arch.fault.esr_el2 at offset %d, beyond a load's 16-bit offset", off)
	}
	if size != 8 {
		return vcpuESR{}, fmt.Errorf("kernel BTF: kvm_vcpu.arch.fault.esr_el2 has %d bytes", size)
	}
	return vcpuESR{varID: id, off: off, vcpuID: vcpuID, castID: castID}, nil
}

// typeNamed is the type of kind T called name in spec, and its ID; what
// names it in errors.
func typeNamed[T btf.Type](spec *btf.Spec, name, what string) (T, btf.TypeID, error) {
	var t T
	if err := spec.TypeByName(name, &t); err != nil {
		return t, 0, fmt.Errorf("kernel BTF: %s: %w", what, err)
	}
	id, err := spec.TypeID(t)
	if err != nil {
		return t, 0, fmt.Errorf("kernel BTF: %s: %w", what, err)
	}
	return t, id, nil
}

// memberOffset is the byte offset and size of the member at path in s.
func memberOffset(s *btf.Struct, path ...string) (off, size uint32, err error) {
	var t btf.Type = s
	for i, name := range path {
		st, ok := btf.As[*btf.Struct](t)
		if !ok {
			return 0, 0, fmt.Errorf("%s is not a struct", path[i-1])
		}
		found := false
		for _, m := range st.Members {
			if m.Name != name {
				continue
			}
			if m.BitfieldSize != 0 || m.Offset%8 != 0 {
				return 0, 0, fmt.Errorf("%s is a bitfield", name)
			}
			off += uint32(m.Offset / 8)
			t, found = m.Type, true
			break
		}
		if !found {
			return 0, 0, fmt.Errorf("no member %s", name)
		}
	}
	sz, err := btf.Sizeof(t)
	if err != nil {
		return 0, 0, err
	}
	return off, uint32(sz), nil
}
