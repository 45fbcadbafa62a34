// Package kvm holds the KVM ioctls that mvm needs beyond the generic ones in
// github.com/c35s/hype/kvm: device control (KVM_CREATE_DEVICE and the
// *_DEVICE_ATTR family), KVM_IRQ_LINE, ONE_REG register access, vCPU
// initialisation, the SMCCC filter and the shared kvm_run page; and the
// KVM uAPI numbers all of mvm uses (ioctl requests, exit reasons,
// system-event types), defined once in uapi.go.
//
// Numbers come from include/uapi/linux/kvm.h and
// arch/arm64/include/uapi/asm/kvm.h; semantics from
// Documentation/virt/kvm/api.rst. Nothing here keeps state: every function
// acts on the file descriptors it is given.
package kvm
