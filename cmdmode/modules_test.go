package cmdmode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func names(mods []Module) string {
	var n []string
	for _, m := range mods {
		n = append(n, m.Name)
	}
	return strings.Join(n, " ")
}

// TestModulesDepResolve: an INSTALL_MOD_PATH tree with a modules.dep as
// depmod writes it (compressed modules, a shared dependency, a '-' in a
// file name): each module comes after what it depends on, once; a name
// with no line (built in) is left out.
func TestModulesDepResolve(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "lib", "modules", "6.12.0-test")
	writeFile(t, filepath.Join(dir, "modules.dep"), `# comment
kernel/fs/fuse/virtiofs.ko.xz: kernel/fs/fuse/fuse.ko.xz kernel/drivers/virtio/virtio-ring.ko.zst
kernel/fs/fuse/fuse.ko.xz:
kernel/drivers/virtio/virtio_mmio.ko.xz: kernel/drivers/virtio/virtio-ring.ko.zst

kernel/drivers/virtio/virtio-ring.ko.zst:
`)
	got := ModuleDir(root, "6.12.0-test")
	if got != dir {
		t.Fatalf("ModuleDir(%s) = %s, want %s", root, got, dir)
	}
	if got := ModuleDir(root, ""); got != dir {
		t.Errorf("ModuleDir without a release = %s, want the only one, %s", got, dir)
	}
	mods, err := FindModules(dir, []string{"virtio_mmio", "virtio_console", "fuse", "virtiofs"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(mods), "virtio_ring virtio_mmio fuse virtiofs"; got != want {
		t.Errorf("load order %q, want %q", got, want)
	}
	for _, m := range mods {
		if !strings.HasPrefix(m.Path, dir+"/kernel/") {
			t.Errorf("%s: path %s is not under the module directory", m.Name, m.Path)
		}
	}
}

// TestModulesDepCycle: a dependency loop is an error, not a hang.
func TestModulesDepCycle(t *testing.T) {
	dep, err := ParseModulesDep(strings.NewReader("a.ko: b.ko\nb.ko: a.ko\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dep.Resolve("/", []string{"a"}); err == nil || !strings.Contains(err.Error(), "itself") {
		t.Errorf("a cycle resolved: %v", err)
	}
}

// TestParseModulesDepErrors: malformed lines are named by number.
func TestParseModulesDepErrors(t *testing.T) {
	for _, in := range []string{"a.ko b.ko\n", ": b.ko\n", "a.txt:\n", "a.ko: b\n", "ok.ko:\nkernel/.ko:\n"} {
		if _, err := ParseModulesDep(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), "line") {
			t.Errorf("ParseModulesDep(%q) = %v, want an error naming the line", in, err)
		}
	}
}

// FuzzParseModulesDep: any input parses or is refused without a panic,
// and what parses resolves without a panic or a module given twice.
func FuzzParseModulesDep(f *testing.F) {
	f.Add("kernel/a.ko.xz: kernel/b.ko.xz\nkernel/b.ko.xz:\n")
	f.Add("a.ko: b.ko\nb.ko: a.ko\n")
	f.Add("# x\n\n/abs/x-y.ko.zst: /abs/z.ko.gz\n")
	f.Fuzz(func(t *testing.T, in string) {
		dep, err := ParseModulesDep(strings.NewReader(in))
		if err != nil {
			return
		}
		var all []string
		for n := range dep {
			all = append(all, n)
		}
		mods, err := dep.Resolve("/m", all)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, m := range mods {
			if seen[m.Name] {
				t.Fatalf("module %s twice in %v", m.Name, mods)
			}
			seen[m.Name] = true
		}
	})
}

// TestFindModulesDepends: without modules.dep (the lab's directory of
// Debian's modules, uncompressed), dependencies come from each module's
// .modinfo depends=: virtio_net needs net_failover, which needs failover.
func TestFindModulesDepends(t *testing.T) {
	dir := filepath.Join("..", ".cache", "lab", "modules")
	if _, err := os.Stat(filepath.Join(dir, "virtio_net.ko")); err != nil {
		t.Skipf("no lab modules (make lab-fetch): %v", err)
	}
	mods, err := FindModules(dir, []string{"virtio_net", "not_there"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(mods), "failover net_failover virtio_net"; got != want {
		t.Errorf("load order %q, want %q", got, want)
	}
}

// TestFindModulesXZWithoutDep: xz modules without modules.dep cannot be
// read for depends=; the error says to run depmod.
func TestFindModulesXZWithoutDep(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "kernel", "virtio_mmio.ko.xz"), "xz")
	if _, err := FindModules(dir, []string{"virtio_mmio"}); err == nil || !strings.Contains(err.Error(), "depmod") {
		t.Errorf("error %v, want one that says to run depmod", err)
	}
}

// TestKernelRelease finds the banner's release, not the format string's.
func TestKernelRelease(t *testing.T) {
	img := []byte("\x00junk Linux version %s (%s@%s) \x00more Linux version 6.12.48+deb13-arm64 (debian-kernel@lists.debian.org) #1 SMP\x00")
	if got, err := KernelRelease(img); err != nil || got != "6.12.48+deb13-arm64" {
		t.Errorf("KernelRelease = %q, %v", got, err)
	}
	if _, err := KernelRelease([]byte("no banner")); err == nil {
		t.Error("KernelRelease of an image without a banner succeeded")
	}
}
