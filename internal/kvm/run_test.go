//go:build linux

package kvm

import (
	"encoding/binary"
	"testing"
)

// TestRunMMIO: an MMIO exit is read from struct kvm_run where the kernel
// writes it (include/uapi/linux/kvm.h: exit_reason at byte 8; the exit
// union at 32, whose mmio member is phys_addr at +0, data[8] at +8, len at
// +16, is_write at +20), and a read's data is filled in place.
func TestRunMMIO(t *testing.T) {
	mem := make([]byte, 4096)
	r, err := newRun(mem)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	le.PutUint32(mem[8:], ExitMMIO)
	le.PutUint64(mem[32:], 0x0900_0007)
	copy(mem[40:48], []byte{0xa5, 1, 2, 3, 4, 5, 6, 7})
	for _, c := range []struct {
		len     uint32
		write   byte
		wantLen int
	}{{1, 1, 1}, {4, 0, 4}, {8, 0, 8}, {9, 0, 8}, {0xffff_ffff, 1, 8}} {
		le.PutUint32(mem[48:], c.len)
		mem[52] = c.write
		addr, data, write := r.MMIO()
		if r.ExitReason() != ExitMMIO || addr != 0x0900_0007 || len(data) != c.wantLen || write != (c.write != 0) || data[0] != 0xa5 {
			t.Errorf("len %d is_write %d: reason %d addr %#x data % x write %v", c.len, c.write, r.ExitReason(), addr, data, write)
		}
	}
	le.PutUint32(mem[48:], 2)
	_, data, _ := r.MMIO()
	data[0], data[1] = 0x34, 0x12
	if got := le.Uint16(mem[40:]); got != 0x1234 {
		t.Errorf("a read's data filled through MMIO's slice reached kvm_run as %#x, want 0x1234", got)
	}
	if _, err := newRun(make([]byte, 40)); err == nil {
		t.Error("a 40-byte kvm_run was accepted")
	}
}
