// Package cmdmode is command mode (mvm run --kernel K -- CMD ARGS...): the
// guest's init, which is mvm's own binary started as /init by the guest
// kernel (Main), the initramfs that carries it with the kernel modules it
// needs (Build), and what the init and the host say to each other over the
// virtio-console ports (the Port* names, Status).
//
// The guest's root is the host's root through a read-only virtio-fs share
// (tag RootTag), with tmpfs over the places programs write to; CMD runs
// there as the invoking user, its stdin, stdout and stderr on three ports,
// its exit status reported on a fourth, over which the host also sends the
// signals mvm receives.
package cmdmode
