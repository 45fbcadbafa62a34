package kvmproc

import (
	"fmt"
	"testing"
)

func TestParseFDLink(t *testing.T) {
	for _, c := range []struct {
		link string
		kind Kind
		vcpu int
		ok   bool
	}{
		{"anon_inode:kvm-vm", KindVM, 0, true},
		{"anon_inode:kvm-vcpu:0", KindVCPU, 0, true},
		{"anon_inode:kvm-vcpu:511", KindVCPU, 511, true},
		// Seen in QEMU 10.0's /proc/PID/fd in the lab.
		{"anon_inode:kvm-vcpu-stats:3", KindVCPUStats, 3, true},
		{"anon_inode:kvm-vm-stats", KindVMStats, 0, true},
		{"anon_inode:kvm-arm-vgic-v3", 0, 0, false},
		{"anon_inode:kvm-vcpu-stats:", 0, 0, false},
		{"anon_inode:[eventfd]", 0, 0, false},
		{"/dev/kvm", 0, 0, false},
		{"anon_inode:kvm-vcpu:", 0, 0, false},
		{"anon_inode:kvm-vcpu:-1", 0, 0, false},
		{"anon_inode:kvm-vcpu:01", 0, 0, false},
		{"anon_inode:kvm-vcpu:1x", 0, 0, false},
		{"kvm-vm", 0, 0, false},
	} {
		kind, vcpu, ok := ParseFDLink(c.link)
		if kind != c.kind || vcpu != c.vcpu || ok != c.ok {
			t.Errorf("ParseFDLink(%q) = %v, %d, %v; want %v, %d, %v", c.link, kind, vcpu, ok, c.kind, c.vcpu, c.ok)
		}
	}
}

func TestVCPUFromName(t *testing.T) {
	for _, c := range []struct {
		name string
		vcpu int
		vmm  string
		ok   bool
	}{
		{"CPU 0/KVM", 0, "qemu", true},
		{"CPU 127/KVM", 127, "qemu", true},
		{"CPU 3/TCG", 0, "", false}, // not KVM: nothing to profile
		{"qemu-system-aar", 0, "", false},
		{"fc_vcpu 0", 0, "firecracker", true},
		{"fc_vcpu 12", 12, "firecracker", true},
		{"fc_api", 0, "", false},
		{"vcpu0", 0, "cloud-hypervisor", true},
		{"vcpu31", 31, "cloud-hypervisor", true},
		{"crosvm_vcpu2", 2, "crosvm", true},
		{"kvm-vcpu-5", 5, "kvmtool", true},
		{"mvm-vcpu-7", 7, "mvm", true},
		{"vcpu", 0, "", false},
		{"vcpu-1", 0, "", false},
		{"vcpu01", 0, "", false},
		{"CPU 1/KVMX", 0, "", false},
		{"", 0, "", false},
	} {
		vcpu, vmm, ok := VCPUFromName(c.name)
		if vcpu != c.vcpu || vmm != c.vmm || ok != c.ok {
			t.Errorf("VCPUFromName(%q) = %d, %q, %v; want %d, %q, %v", c.name, vcpu, vmm, ok, c.vcpu, c.vmm, c.ok)
		}
	}
}

func TestParseSyscall(t *testing.T) {
	const arm64Ioctl, amd64Ioctl = 29, 16
	for _, c := range []struct {
		line string
		nr   uint64
		fd   int
		ok   bool
	}{
		// QEMU's vCPU 1 thread in the lab, blocked in KVM_RUN on fd 11.
		{"29 0xb 0xae80 0x0 0x0 0x0 0x0 0xffff8f488d60 0xffff917d9990\n", arm64Ioctl, 11, true},
		{"16 0x5 0xae80 0x0 0x0 0x0 0x0 0x7ffd 0x7f00\n", amd64Ioctl, 5, true},
		{"16 0x5 0xae80 0x0 0x0 0x0 0x0 0x7ffd 0x7f00\n", arm64Ioctl, 0, false}, // another arch's number
		{"29 0xb 0xae81 0x0 0x0 0x0 0x0 0x1 0x2", arm64Ioctl, 0, false},         // not KVM_RUN
		{"73 0xaaaae4b04230 0x4 0x0 0x0 0x8 0x0 0xffffe958dc90 0xffff9177f1ec", arm64Ioctl, 0, false},
		{"running\n", arm64Ioctl, 0, false},
		{"-1 0xffff 0xffff\n", arm64Ioctl, 0, false},
		{"29 0xffffffffffffffff 0xae80 0 0 0 0 0 0", arm64Ioctl, 0, false},
		{"", arm64Ioctl, 0, false},
	} {
		fd, ok := ParseSyscall(c.line, c.nr)
		if fd != c.fd || ok != c.ok {
			t.Errorf("ParseSyscall(%q, %d) = %d, %v; want %d, %v", c.line, c.nr, fd, ok, c.fd, c.ok)
		}
	}
}

// FuzzVCPUFromName: a recognised name is exactly its VMM's pattern around
// the decimal index, so formatting the result gives the name back.
func FuzzVCPUFromName(f *testing.F) {
	for _, s := range []string{"CPU 0/KVM", "fc_vcpu 3", "vcpu9", "crosvm_vcpu1", "kvm-vcpu-0", "mvm-vcpu-2", "vcpu00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		id, vmm, ok := VCPUFromName(name)
		if !ok {
			return
		}
		for _, p := range threadPatterns {
			if p.vmm == vmm {
				if got := fmt.Sprintf("%s%d%s", p.prefix, id, p.suffix); got != name {
					t.Fatalf("VCPUFromName(%q) = %d, %s, which formats as %q", name, id, vmm, got)
				}
				return
			}
		}
		t.Fatalf("VCPUFromName(%q) named unknown VMM %q", name, vmm)
	})
}

// FuzzParseFDLink: a recognised vCPU link formats back to itself.
func FuzzParseFDLink(f *testing.F) {
	f.Add("anon_inode:kvm-vcpu:4")
	f.Add("anon_inode:kvm-vm")
	f.Fuzz(func(t *testing.T, link string) {
		kind, id, ok := ParseFDLink(link)
		if !ok {
			return
		}
		want := "anon_inode:" + kind.String()
		if kind == KindVCPU || kind == KindVCPUStats {
			want = fmt.Sprintf("anon_inode:%s:%d", kind, id)
		}
		if link != want {
			t.Fatalf("ParseFDLink(%q) = %v %d", link, kind, id)
		}
	})
}
