package guest

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ModuleDir is where AddModules puts kernel modules in an initramfs, with
// ModuleOrder listing them in the order insmod must load them.
const (
	ModuleDir   = "lib/modules/mvm"
	ModuleOrder = ModuleDir + "/order"
)

// VirtioModules are the modules of Debian's arm64 kernel that a guest of
// mvm needs for its virtio devices (Debian builds them as modules).
var VirtioModules = []string{"virtio_mmio", "virtio_blk", "failover", "net_failover", "virtio_net", "virtio-rng"}

// AddModules adds the kernel modules names (NAME.ko, uncompressed, in dir)
// and the ones they depend on (read from each module's .modinfo
// "depends=" entry) to the archive, with ModuleOrder listing them
// dependencies first. Modules the kernel has built in are not in dir and
// not needed: a missing dependency is skipped, a missing named module is an
// error.
func (a *Initramfs) AddModules(dir string, names []string) error {
	deps := map[string][]string{}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string, required bool) error
	visit = func(name string, required bool) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("initramfs: module %s depends on itself", name)
		case 2:
			return nil
		}
		path := filepath.Join(dir, name+".ko")
		data, err := os.ReadFile(path)
		if err != nil {
			// Module names use - and _ interchangeably.
			alt := filepath.Join(dir, strings.ReplaceAll(name, "_", "-")+".ko")
			if d2, err2 := os.ReadFile(alt); err2 == nil {
				data, path, err = d2, alt, nil
			}
		}
		if err != nil {
			if !required {
				state[name] = 2 // built into the kernel
				return nil
			}
			return fmt.Errorf("initramfs: kernel module %s: %w (run 'make lab-fetch')", name, err)
		}
		state[name] = 1
		d, err := moduleDepends(data)
		if err != nil {
			return fmt.Errorf("initramfs: %s: %w", path, err)
		}
		deps[name] = d
		for _, dep := range d {
			if err := visit(dep, false); err != nil {
				return err
			}
		}
		state[name] = 2
		base := filepath.Base(path)
		if err := a.AddFile(ModuleDir+"/"+base, data, 0o644); err != nil {
			return err
		}
		order = append(order, base)
		return nil
	}
	for _, n := range names {
		if err := visit(n, true); err != nil {
			return err
		}
	}
	return a.AddFile(ModuleOrder, []byte(strings.Join(order, "\n")+"\n"), 0o644)
}

// moduleDepends reads the comma-separated depends= entry of a module's
// .modinfo section (NUL-separated key=value strings).
func moduleDepends(ko []byte) ([]string, error) {
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		return nil, fmt.Errorf("not an ELF kernel module (decompress .ko.xz first): %w", err)
	}
	s := f.Section(".modinfo")
	if s == nil {
		return nil, fmt.Errorf("no .modinfo section")
	}
	info, err := s.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(info, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}
