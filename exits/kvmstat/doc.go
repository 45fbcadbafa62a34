// Package kvmstat is the KVM binary statistics source of mvm's exit profile
// (Documentation/virt/kvm/api.rst, section "KVM_GET_STATS_FD"; Linux 5.14+,
// capability KVM_CAP_BINARY_STATS_FD).
//
// stats.go is a pure parser of the stats file read through an io.ReaderAt
// (header, descriptors, snapshots, deltas); rows.go turns deltas into rows
// of the report model in package exits; file_linux.go opens the stats
// file of a VM or vCPU file descriptor (internal/kvm issues the
// KVM_GET_STATS_FD ioctl) and keeps it open for snapshots.
package kvmstat
