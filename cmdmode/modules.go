package cmdmode

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Drivers are what the init needs from the guest kernel, built in or as
// modules, with the module that provides each and the kernel option that
// builds it. The init checks each one (Check) after loading the modules.
var Drivers = []Driver{
	{Module: "virtio_mmio", Config: "CONFIG_VIRTIO_MMIO"},
	{Module: "virtio_console", Config: "CONFIG_VIRTIO_CONSOLE"},
	{Module: "fuse", Config: "CONFIG_FUSE_FS"},
	{Module: "virtiofs", Config: "CONFIG_VIRTIO_FS"},
}

// OverlayDriver is what --overlay needs besides the Drivers: overlayfs
// (Documentation/filesystems/overlayfs.rst), a module in distribution
// kernels (Debian's overlay.ko).
var OverlayDriver = Driver{Module: "overlay", Config: "CONFIG_OVERLAY_FS"}

// Driver is one kernel driver the init needs.
type Driver struct {
	Module string // module name (modules.dep's spelling, '-' as '_')
	Config string // the Kconfig option that builds it
}

// Module is one module file to load, on the host.
type Module struct {
	Name string // normalised module name
	Path string // host path
}

// moduleName is a module's name from its file name: the base without
// .ko and a compression suffix, '-' read as '_' (kmod treats them alike).
func moduleName(file string) (string, bool) {
	b := path.Base(file)
	for _, suf := range []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"} {
		if n, ok := strings.CutSuffix(b, suf); ok && n != "" {
			return strings.ReplaceAll(n, "-", "_"), true
		}
	}
	return "", false
}

// Compressed reports whether a module file is compressed; the init then
// passes MODULE_INIT_COMPRESSED_FILE and the kernel decompresses it
// (CONFIG_MODULE_DECOMPRESS, Linux 5.17+).
func Compressed(file string) bool {
	return strings.HasSuffix(file, ".xz") || strings.HasSuffix(file, ".zst") || strings.HasSuffix(file, ".gz")
}

// ModulesDep is a parsed modules.dep: each module's file (relative to the
// module directory, or absolute) and the files it depends on.
type ModulesDep map[string]DepEntry

// DepEntry is one line of modules.dep.
type DepEntry struct {
	File string
	Deps []string
}

// ParseModulesDep reads modules.dep as depmod(8) writes it: one line per
// module, "FILE: DEP DEP ...", blank lines and # comments ignored. A line
// without the colon, or naming something that is not a module file, is an
// error with its line number.
func ParseModulesDep(r io.Reader) (ModulesDep, error) {
	out := ModulesDep{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		file, deps, ok := strings.Cut(line, ":")
		file = strings.TrimSpace(file)
		if !ok || file == "" {
			return nil, fmt.Errorf("modules.dep line %d: %q is not FILE: DEPS", n, truncate(line))
		}
		name, ok := moduleName(file)
		if !ok {
			return nil, fmt.Errorf("modules.dep line %d: %q is not a .ko file", n, truncate(file))
		}
		e := DepEntry{File: file}
		for _, d := range strings.Fields(deps) {
			if _, ok := moduleName(d); !ok {
				return nil, fmt.Errorf("modules.dep line %d: dependency %q is not a .ko file", n, truncate(d))
			}
			e.Deps = append(e.Deps, d)
		}
		out[name] = e
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("modules.dep: %w", err)
	}
	return out, nil
}

// Resolve lists the modules of names that dep knows, each after the ones
// it depends on; names dep does not know are left out (built into the
// kernel, or not built: the init finds out). dir is where dep's relative
// paths start.
func (dep ModulesDep) Resolve(dir string, names []string) ([]Module, error) {
	var out []Module
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string, depth int) error
	visit = func(name string, depth int) error {
		e, ok := dep[name]
		if !ok || state[name] == 2 {
			return nil
		}
		if state[name] == 1 || depth > len(dep) {
			return fmt.Errorf("modules.dep: module %s depends on itself", name)
		}
		state[name] = 1
		for _, d := range e.Deps {
			dn, _ := moduleName(d)
			if err := visit(dn, depth+1); err != nil {
				return err
			}
		}
		state[name] = 2
		p := e.File
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		out = append(out, Module{Name: name, Path: p})
		return nil
	}
	for _, n := range names {
		if err := visit(strings.ReplaceAll(n, "-", "_"), 0); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ModuleDir finds the module directory under dir: dir itself when it
// holds modules.dep, else DIR/lib/modules/RELEASE (an INSTALL_MOD_PATH
// tree; the only release there when release is empty or absent), else dir
// (a directory of .ko files, or a kernel build tree).
func ModuleDir(dir, release string) string {
	if fileExists(filepath.Join(dir, "modules.dep")) {
		return dir
	}
	base := filepath.Join(dir, "lib", "modules")
	if release != "" && fileExists(filepath.Join(base, release, "modules.dep")) {
		return filepath.Join(base, release)
	}
	if ents, err := os.ReadDir(base); err == nil && len(ents) == 1 && ents[0].IsDir() {
		return filepath.Join(base, ents[0].Name())
	}
	return dir
}

// NeedsRelease reports whether ModuleDir needs the kernel's release to
// choose: dir has no modules.dep of its own and several
// lib/modules/RELEASE directories.
func NeedsRelease(dir string) bool {
	if fileExists(filepath.Join(dir, "modules.dep")) {
		return false
	}
	ents, err := os.ReadDir(filepath.Join(dir, "lib", "modules"))
	return err == nil && len(ents) > 1
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// FindModules resolves names in the module directory dir (ModuleDir's
// answer): through its modules.dep where there is one, else by finding
// each NAME.ko[.gz|.zst] under dir and reading the depends= of its
// .modinfo. A name with no file is left out (built in, or missing: the
// init tells which).
func FindModules(dir string, names []string) ([]Module, error) {
	if f, err := os.Open(filepath.Join(dir, "modules.dep")); err == nil {
		defer f.Close()
		dep, err := ParseModulesDep(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name(), err)
		}
		return dep.Resolve(dir, names)
	}
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil // an unreadable corner of a build tree
		}
		if d.Type().IsRegular() {
			if n, ok := moduleName(p); ok {
				if _, dup := files[n]; !dup {
					files[n] = p
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("--modules %s: %w", dir, err)
	}
	dep := ModulesDep{}
	var visit func(n string) error
	visit = func(n string) error {
		p, ok := files[n]
		if _, seen := dep[n]; !ok || seen {
			return nil
		}
		deps, err := readDepends(p)
		if err != nil {
			return err
		}
		e := DepEntry{File: p}
		dep[n] = e
		for _, d := range deps {
			d = strings.ReplaceAll(d, "-", "_")
			if dp, ok := files[d]; ok {
				e.Deps = append(e.Deps, dp)
			}
			if err := visit(d); err != nil {
				return err
			}
		}
		dep[n] = e
		return nil
	}
	for _, n := range names {
		if err := visit(strings.ReplaceAll(n, "-", "_")); err != nil {
			return nil, err
		}
	}
	return dep.Resolve(dir, names)
}

// readDepends reads the depends= entry of a module's .modinfo section
// (NUL-separated key=value strings, include/linux/moduleparam.h).
func readDepends(file string) ([]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("module %w", err)
	}
	switch {
	case strings.HasSuffix(file, ".gz"):
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err == nil {
			data, err = io.ReadAll(io.LimitReader(zr, 64<<20))
		}
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", file, err)
		}
	case strings.HasSuffix(file, ".zst"):
		zr, err := zstd.NewReader(bytes.NewReader(data))
		if err == nil {
			data, err = io.ReadAll(io.LimitReader(zr, 64<<20))
			zr.Close()
		}
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", file, err)
		}
	case strings.HasSuffix(file, ".xz"):
		return nil, fmt.Errorf("module %s is xz-compressed and its directory has no modules.dep: run depmod (depmod -b ROOT RELEASE) or pass --modules a directory that has one", file)
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("module %s is not an ELF file: %w", file, err)
	}
	s := f.Section(".modinfo")
	if s == nil {
		return nil, fmt.Errorf("module %s has no .modinfo section", file)
	}
	info, err := s.Data()
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", file, err)
	}
	for _, kv := range bytes.Split(info, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			var out []string
			for _, d := range strings.Split(string(v), ",") {
				if d != "" {
					out = append(out, d)
				}
			}
			sort.Strings(out)
			return out, nil
		}
	}
	return nil, nil
}

// KernelRelease finds the release (uname -r) in an arm64 Image: the
// banner "Linux version RELEASE (" that init/version.c puts in linux_banner.
func KernelRelease(image []byte) (string, error) {
	const banner = "Linux version "
	for rest := image; ; {
		i := bytes.Index(rest, []byte(banner))
		if i < 0 {
			return "", errors.New("no \"Linux version\" banner in the kernel image")
		}
		rest = rest[i+len(banner):]
		end := bytes.IndexAny(rest, " \x00\n")
		if end <= 0 || end > 64 {
			continue
		}
		rel := string(rest[:end])
		// The format string "Linux version %s (%s@%s)" is in the image
		// too (in UTS_RELEASE-less builds); a release has no '%'.
		if !strings.ContainsAny(rel, "%/") {
			return rel, nil
		}
	}
}
