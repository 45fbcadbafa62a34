// Package kvm is mvm's one home for the KVM API: the only package that
// calls github.com/c35s/hype/kvm (for the generic system, VM and vCPU
// ioctls, behind CreateVM, CreateVCPU, SetUserMemoryRegion, IRQFD and
// CheckExtension), and the rest itself: device control (KVM_CREATE_DEVICE
// and the *_DEVICE_ATTR family), KVM_IRQ_LINE, KVM_IOEVENTFD, ONE_REG
// register access with typed register ids (RegID), vCPU initialisation,
// the SMCCC filter, the stats fd and the shared kvm_run page; and the KVM
// uAPI numbers all of mvm uses (ioctl requests, exit reasons,
// system-event types, capabilities, register ids), defined once in
// uapi.go. File descriptors are plain *os.File.
//
// Numbers come from include/uapi/linux/kvm.h and
// arch/arm64/include/uapi/asm/kvm.h; semantics from
// Documentation/virt/kvm/api.rst. Nothing here keeps state: every function
// acts on the file descriptors it is given.
package kvm
