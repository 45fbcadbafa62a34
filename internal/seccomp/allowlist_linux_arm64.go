//go:build linux && arm64

package seccomp

import (
	"golang.org/x/sys/unix"

	"github.com/mvm-dev/mvm/internal/kvm"
)

// Arch is the audit architecture the allow-list is for.
const Arch = unix.AUDIT_ARCH_AARCH64

// Run is mvm run's allow-list once the VM is set up: the calls of the Go
// runtime, of the run loop and devices, of profiling, the metrics server,
// the console, reboots and the end of the run. pid is mvm's own: signals
// may go to its threads only. docs/seccomp.md explains each entry; a call
// added to the run path (a device thread's, a new profiler's) goes here
// and there. Setup (opening /dev/kvm, creating the VM, perf_event_open,
// binding the metrics socket, mounting tracefs) happens before the filter
// and needs none of its calls. sampled is set for mvm run --profile=light,
// whose windows attach and detach mvm's loaded BPF programs while the VM
// runs.
func Run(pid int, sampled bool) []Rule {
	ioctls := append(kvm.RunRequests(),
		unix.PERF_EVENT_IOC_ENABLE, unix.PERF_EVENT_IOC_DISABLE, // profiler start/stop
		unix.TCGETS, unix.TCSETS, // the terminal restored at the end (x/term)
	)
	return []Rule{
		// KVM, perf and terminal ioctls, by request (arg 1). First, and
		// KVM_RUN first among them (kvm.RunRequests): the filter tests
		// the rules in order on every call, and a vCPU's KVM_RUN and
		// ONE_REG ioctls are nearly all the calls a running VM makes. A
		// call with argument checks cannot use the kernel's seccomp
		// action cache, so each rule ahead of it cost every exit a
		// comparison (BenchmarkMMIOExit, docs/seccomp.md).
		AllowIf("ioctl", unix.SYS_IOCTL, 1, ^uint32(0), ioctls...),
		Allow("futex", unix.SYS_FUTEX), // vCPU parks and wake-ups, the Go runtime
		// Go runtime: memory. Never executable: mvm maps no code after
		// its start, so PROT_EXEC is refused (arg 2 is prot).
		AllowIf("mmap", unix.SYS_MMAP, 2, unix.PROT_EXEC, 0),
		AllowIf("mprotect", unix.SYS_MPROTECT, 2, unix.PROT_EXEC, 0),
		Allow("munmap", unix.SYS_MUNMAP),
		Allow("madvise", unix.SYS_MADVISE),
		Allow("mincore", unix.SYS_MINCORE), // also vmm's resident guest RAM
		// Go 1.25+ names its anonymous mappings; no other prctl.
		AllowIf("prctl", unix.SYS_PRCTL, 0, ^uint32(0), unix.PR_SET_VMA),
		// Go runtime: threads, scheduling, timers, signals.
		AllowIf("clone", unix.SYS_CLONE, 0, unix.CLONE_THREAD, unix.CLONE_THREAD), // threads, never a new process
		Allow("exit", unix.SYS_EXIT),
		Allow("exit_group", unix.SYS_EXIT_GROUP),
		Allow("nanosleep", unix.SYS_NANOSLEEP),
		Allow("sched_yield", unix.SYS_SCHED_YIELD),
		// The vCPU threads' bound on a raw KVM_RUN (vcpu's rawTimer):
		// a timer that signals the thread itself.
		Allow("timer_create", unix.SYS_TIMER_CREATE),
		Allow("timer_settime", unix.SYS_TIMER_SETTIME),
		Allow("timer_delete", unix.SYS_TIMER_DELETE),
		Allow("sched_getaffinity", unix.SYS_SCHED_GETAFFINITY),
		Allow("clock_gettime", unix.SYS_CLOCK_GETTIME),
		Allow("restart_syscall", unix.SYS_RESTART_SYSCALL),
		Allow("getrandom", unix.SYS_GETRANDOM), // also virtio-rng's entropy
		Allow("rt_sigaction", unix.SYS_RT_SIGACTION),
		Allow("rt_sigprocmask", unix.SYS_RT_SIGPROCMASK),
		Allow("rt_sigreturn", unix.SYS_RT_SIGRETURN),
		Allow("sigaltstack", unix.SYS_SIGALTSTACK),
		Allow("getpid", unix.SYS_GETPID),
		Allow("gettid", unix.SYS_GETTID),
		// Preemption (SIGURG) and vCPU kicks go to mvm's own threads;
		// kill is the runtime's raise of a fatal signal to itself.
		AllowIf("tgkill", unix.SYS_TGKILL, 0, ^uint32(0), uint32(pid)),
		AllowIf("kill", unix.SYS_KILL, 0, ^uint32(0), uint32(pid)),
		// Go runtime: the network poller (metrics server, pipes, stdin).
		Allow("epoll_create1", unix.SYS_EPOLL_CREATE1),
		Allow("epoll_ctl", unix.SYS_EPOLL_CTL),
		Allow("epoll_pwait", unix.SYS_EPOLL_PWAIT),
		Allow("epoll_pwait2", unix.SYS_EPOLL_PWAIT2),
		Allow("eventfd2", unix.SYS_EVENTFD2),
		// Files: the console, result, report and profile files, reboot's re-read
		// of the kernel and initrd, /proc/self for memory use at the end.
		Allow("openat", unix.SYS_OPENAT),
		Allow("close", unix.SYS_CLOSE),
		Allow("read", unix.SYS_READ),
		Allow("write", unix.SYS_WRITE),
		Allow("pread64", unix.SYS_PREAD64), // also the KVM stats fds
		Allow("lseek", unix.SYS_LSEEK),
		Allow("fstat", unix.SYS_FSTAT),
		Allow("newfstatat", unix.SYS_FSTATAT),
		Allow("fcntl", unix.SYS_FCNTL),
		// --report is written to a temporary file, then renamed.
		Allow("fchmod", unix.SYS_FCHMOD),
		Allow("renameat", unix.SYS_RENAMEAT),
		Allow("unlinkat", unix.SYS_UNLINKAT),
		// os.Hostname's fallback for the result's host.
		Allow("uname", unix.SYS_UNAME),
		Allow("ppoll", unix.SYS_PPOLL), // the tracepoint ring buffers
		// The BPF exit counters' maps, read at the end and per metrics
		// scrape (by key: BPF_MAP_GET_NEXT_KEY, BPF_MAP_LOOKUP_ELEM);
		// loading programs or creating maps stays refused.
		AllowIf("bpf", unix.SYS_BPF, 0, ^uint32(0), bpfCommands(sampled)...),
		// virtio-blk: guest requests on the disk image, flushes.
		Allow("preadv", unix.SYS_PREADV),
		Allow("pwritev", unix.SYS_PWRITEV),
		Allow("fdatasync", unix.SYS_FDATASYNC),
		// virtio-net: frames from and to the tap device.
		Allow("readv", unix.SYS_READV),
		Allow("writev", unix.SYS_WRITEV),
		// The metrics server: connections on the socket bound at setup.
		Allow("accept4", unix.SYS_ACCEPT4),
		Allow("setsockopt", unix.SYS_SETSOCKOPT),
		Allow("getsockname", unix.SYS_GETSOCKNAME),
		Allow("shutdown", unix.SYS_SHUTDOWN),
		// virtio-fs (--share): vhost-user requests to virtiofsd, with
		// file descriptors (SET_MEM_TABLE, SET_VRING_KICK/CALL) in
		// SCM_RIGHTS, when the guest's driver sets DRIVER_OK; at the end,
		// reaping virtiofsd (os.Process.Wait: waitid on its pidfd, wait4
		// without pidfds) and killing one that does not exit (a pidfd
		// reaches only mvm's own children). virtiofsd is started before
		// the filter, so no clone or execve is needed.
		Allow("sendmsg", unix.SYS_SENDMSG),
		Allow("recvmsg", unix.SYS_RECVMSG),
		Allow("waitid", unix.SYS_WAITID),
		Allow("wait4", unix.SYS_WAIT4),
		Allow("pidfd_send_signal", unix.SYS_PIDFD_SEND_SIGNAL),
	}
}

// bpfCommands are the bpf(2) commands of the run: reading the counters'
// maps; with a sampled profile also attaching a program mvm loaded during
// setup to a raw tracepoint (BPF_RAW_TRACEPOINT_OPEN: a program fd in, a
// link fd out, closed to detach) and clearing a thread's pairing times
// in the thread map (BPF_MAP_UPDATE_ELEM on mvm's own map). Loading
// programs and creating maps stay refused either way.
func bpfCommands(sampled bool) []uint32 {
	cmds := []uint32{unix.BPF_MAP_LOOKUP_ELEM, unix.BPF_MAP_GET_NEXT_KEY}
	if sampled {
		cmds = append(cmds, unix.BPF_RAW_TRACEPOINT_OPEN, unix.BPF_MAP_UPDATE_ELEM)
	}
	return cmds
}
