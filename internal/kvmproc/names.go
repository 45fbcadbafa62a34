package kvmproc

import (
	"strconv"
	"strings"

	"github.com/mvm-dev/mvm/internal/kvm"
)

// Kind says what a KVM file descriptor is.
type Kind uint8

// Kinds of KVM descriptors.
const (
	KindVM        Kind = iota + 1 // anon_inode:kvm-vm
	KindVCPU                      // anon_inode:kvm-vcpu:N
	KindVMStats                   // anon_inode:kvm-vm-stats
	KindVCPUStats                 // anon_inode:kvm-vcpu-stats:N
)

func (k Kind) String() string {
	switch k {
	case KindVM:
		return "kvm-vm"
	case KindVCPU:
		return "kvm-vcpu"
	case KindVMStats:
		return "kvm-vm-stats"
	case KindVCPUStats:
		return "kvm-vcpu-stats"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// ParseFDLink classifies the target of a /proc/PID/fd/N link. KVM names
// its anonymous inodes in virt/kvm/kvm_main.c: "kvm-vm" (KVM_CREATE_VM),
// "kvm-vcpu:%d" (KVM_CREATE_VCPU, the vCPU id), and for KVM_GET_STATS_FD
// "kvm-vm-stats" and "kvm-vcpu-stats:%d". Other inodes (devices such as
// kvm-arm-vgic-v3, eventfds) give ok false.
func ParseFDLink(link string) (kind Kind, vcpu int, ok bool) {
	name, found := strings.CutPrefix(link, "anon_inode:")
	if !found {
		return 0, 0, false
	}
	switch name {
	case "kvm-vm":
		return KindVM, 0, true
	case "kvm-vm-stats":
		return KindVMStats, 0, true
	}
	for _, k := range []struct {
		prefix string
		kind   Kind
	}{{"kvm-vcpu:", KindVCPU}, {"kvm-vcpu-stats:", KindVCPUStats}} {
		if n, found := strings.CutPrefix(name, k.prefix); found {
			if id, err := strconv.Atoi(n); err == nil && id >= 0 && strconv.Itoa(id) == n {
				return k.kind, id, true
			}
		}
	}
	return 0, 0, false
}

// VMM thread-name patterns: a fixed prefix and a decimal vCPU index, with
// an optional fixed suffix. Checked against each project's source:
//   - QEMU: "CPU %d/%s" with the accelerator's name (accel/*/ and
//     system/cpus.c), only with -name debug-threads=on; without it every
//     thread keeps the program's name ("qemu-system-aar").
//   - Firecracker: "fc_vcpu {}" (vmm/src/vstate/vcpu).
//   - Cloud Hypervisor: "vcpu{}" (vmm/src/cpu.rs).
//   - crosvm: "crosvm_vcpu{}" (src/crosvm/sys/linux/vcpu.rs).
//   - kvmtool: "kvm-vcpu-%lu" (builtin-run.c).
//   - mvm: "mvm-vcpu-%d" (package vcpu).
var threadPatterns = [...]struct{ vmm, prefix, suffix string }{
	{"qemu", "CPU ", "/KVM"},
	{"firecracker", "fc_vcpu ", ""},
	{"crosvm", "crosvm_vcpu", ""},
	{"kvmtool", "kvm-vcpu-", ""},
	{"mvm", "mvm-vcpu-", ""},
	{"cloud-hypervisor", "vcpu", ""},
}

// VCPUFromName reads the vCPU index from a thread name (/proc/PID/task/TID/
// comm, at most 15 bytes) of one of the VMMs above, and names the VMM.
func VCPUFromName(name string) (vcpu int, vmm string, ok bool) {
	for _, p := range threadPatterns {
		rest, found := strings.CutPrefix(name, p.prefix)
		if !found {
			continue
		}
		num, found := strings.CutSuffix(rest, p.suffix)
		if !found || num == "" || len(num) > 6 {
			continue
		}
		id, err := strconv.Atoi(num)
		if err != nil || id < 0 || strconv.Itoa(id) != num {
			continue
		}
		return id, p.vmm, true
	}
	return 0, "", false
}

// ParseSyscall reads /proc/PID/task/TID/syscall (fs/proc/base.c,
// proc_pid_syscall: "NR ARG0 ARG1 ... SP PC" in decimal and hex, "running"
// for a task on a CPU, "-1 SP PC" outside a system call) and reports the
// file descriptor of a KVM_RUN ioctl the thread is blocked in. ioctlNR is
// the architecture's ioctl system call number.
func ParseSyscall(line string, ioctlNR uint64) (fd int, ok bool) {
	f := strings.Fields(line)
	if len(f) < 3 {
		return 0, false
	}
	nr, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil || nr != ioctlNR {
		return 0, false
	}
	a0, err0 := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
	a1, err1 := strconv.ParseUint(strings.TrimPrefix(f[2], "0x"), 16, 64)
	if err0 != nil || err1 != nil || a1 != kvm.ReqRun || a0 > 1<<31-1 {
		return 0, false
	}
	return int(a0), true
}
