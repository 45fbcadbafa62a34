// Package virtio holds mvm's virtio devices — block (virtio-blk), network
// (virtio-net on a tap) and entropy (virtio-rng) — behind the virtio-mmio
// transport (virtio 1.2, section 4.2, register layout version 2), with split
// virtqueues (section 2.7) that treat guest memory as hostile: every ring
// and buffer address is bounds-checked, chains are length-limited, the ring
// indices are read and published with acquire/release atomics, and no guest
// input can panic the process. A misbehaving driver gets the device marked
// DEVICE_NEEDS_RESET or its request failed; mvm logs it once and counts it.
//
// Devices run off the vCPU threads: each queue has a worker goroutine that
// waits on the queue's notification eventfd (which KVM signals directly
// through an ioeventfd when the VMM registers one) and raises the device's
// interrupt through a callback (an irqfd write). The wire constants come from
// github.com/c35s/hype/virtio; why the rest of hype's virtio stack is not
// used is in docs/devices.md.
package virtio
