// Package seccomp builds a seccomp-BPF allow-list and installs it on every
// thread of the process at once (Linux's SECCOMP_FILTER_FLAG_TSYNC; threads
// created later inherit it). A call outside the list kills the whole
// process (SECCOMP_RET_KILL_PROCESS). The kernel's reference is
// Documentation/userspace-api/seccomp_filter.rst; docs/seccomp.md says
// which calls mvm allows and why.
package seccomp
