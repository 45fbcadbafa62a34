//go:build linux

package vmm

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/mvm-dev/mvm/internal/kvm"
)

// guestRAM is the VM's RAM: one mapping per region, each a KVM memory
// slot. It is anonymous memory, or with shared set one memfd holding every
// region back to back, which vhost-user backends (virtiofsd) map too.
type guestRAM struct {
	regions []Region
	mem     [][]byte
	memfd   int      // -1 unless shared
	offsets []uint64 // each region's offset in the memfd
}

func newGuestRAM(vm *os.File, regions []Region, shared bool) (*guestRAM, error) {
	g := &guestRAM{regions: regions, memfd: -1}
	if shared {
		var total uint64
		for _, r := range regions {
			g.offsets = append(g.offsets, total)
			total += r.Size
		}
		fd, err := unix.MemfdCreate("mvm-guest-ram", unix.MFD_CLOEXEC)
		if err != nil {
			return nil, fmt.Errorf("memfd for shared guest RAM: %w", err)
		}
		g.memfd = fd
		if err := unix.Ftruncate(fd, int64(total)); err != nil {
			g.close()
			return nil, fmt.Errorf("size the guest RAM memfd to %s: %w", FormatSize(total), err)
		}
	}
	for i, r := range regions {
		// MAP_NORESERVE: a large guest costs only what it touches.
		var m []byte
		var err error
		if shared {
			m, err = unix.Mmap(g.memfd, int64(g.offsets[i]), int(r.Size), unix.PROT_READ|unix.PROT_WRITE,
				unix.MAP_SHARED|unix.MAP_NORESERVE)
		} else {
			m, err = unix.Mmap(-1, 0, int(r.Size), unix.PROT_READ|unix.PROT_WRITE,
				unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
		}
		if err != nil {
			g.close()
			return nil, fmt.Errorf("map %s of guest RAM: %w", FormatSize(r.Size), err)
		}
		g.mem = append(g.mem, m)
		if err := kvm.SetUserMemoryRegion(vm, uint32(i), r.Base, r.Size, uint64(uintptrOf(m))); err != nil {
			g.close()
			return nil, fmt.Errorf("KVM_SET_USER_MEMORY_REGION slot %d at %#x: %w", i, r.Base, err)
		}
	}
	return g, nil
}

// slice returns guest memory [addr, addr+size) or an error if it is not RAM.
func (g *guestRAM) slice(addr, size uint64) ([]byte, error) {
	for i, r := range g.regions {
		if addr >= r.Base && addr+size <= r.End() && addr+size >= addr {
			off := addr - r.Base
			return g.mem[i][off : off+size], nil
		}
	}
	return nil, fmt.Errorf("guest range %#x+%#x is not in RAM", addr, size)
}

// contains reports whether addr is guest RAM.
func (g *guestRAM) contains(addr uint64) bool {
	_, err := g.slice(addr, 1)
	return err == nil
}

// resident returns the bytes of guest RAM that are resident in host memory.
func (g *guestRAM) resident() (uint64, error) {
	var total uint64
	page := unix.Getpagesize()
	for _, m := range g.mem {
		vec := make([]byte, (len(m)+page-1)/page)
		if err := mincore(m, vec); err != nil {
			return 0, fmt.Errorf("mincore guest RAM: %w", err)
		}
		for _, b := range vec {
			if b&1 != 0 {
				total += uint64(page)
			}
		}
	}
	return total, nil
}

func (g *guestRAM) close() {
	for _, m := range g.mem {
		unix.Munmap(m)
	}
	g.mem = nil
	if g.memfd >= 0 {
		unix.Close(g.memfd)
		g.memfd = -1
	}
}

// procKB reads one "Name:   N kB" field of a /proc file, 0 if unreadable.
func procKB(path, field string) uint64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kb uint64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}
