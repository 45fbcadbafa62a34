// Package integration holds mvm's end-to-end tests on real arm64 KVM. They
// run the cross-compiled mvm binary (MVM_BIN) on the payloads in
// MVM_GUEST_DIR and on the Linux Image MVM_LINUX, either natively on an
// arm64 host or inside the emulated arm64 lab (make lab-test). They fail,
// never skip, when what they need is missing.
package integration
