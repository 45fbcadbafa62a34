// Package kvmproc looks at the KVM objects of another process — a VMM such
// as QEMU, Firecracker, Cloud Hypervisor, crosvm, kvmtool or another mvm —
// from outside: which of its file descriptors are its VM and vCPUs
// (/proc/PID/fd shows them as anon_inode:kvm-vm and anon_inode:kvm-vcpu:N),
// copies of those descriptors for mvm (pidfd_open + pidfd_getfd), and which
// of its threads runs which vCPU (the thread's name where the VMM sets one,
// or the KVM_RUN ioctl the thread is in).
//
// KVM refuses every VM and vCPU ioctl from a process other than the VM's
// creator (kvm_vm_ioctl and kvm_vcpu_ioctl return EIO when kvm->mm is not
// current->mm, virt/kvm/kvm_main.c), KVM_GET_STATS_FD included. So a copied
// VM or vCPU descriptor cannot give mvm a stats file; the VMM's own stats
// files can be copied and read (pread needs no mm): QEMU opens one per vCPU
// (anon_inode:kvm-vcpu-stats:N) when it creates the vCPU.
//
// Copying a descriptor needs ptrace access to the process
// (PTRACE_MODE_ATTACH_REALCREDS: root, CAP_SYS_PTRACE, or the same user
// under Yama's ptrace_scope 0/1 rules). Listing /proc/PID/fd goes by the
// directory's mode (0500, the process's owner; fs/proc/fd.c
// proc_fd_permission), so another user's VMM also needs
// CAP_DAC_READ_SEARCH.
package kvmproc
