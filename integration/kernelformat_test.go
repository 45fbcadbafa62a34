//go:build linux && arm64

package integration

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/guest"
	"github.com/mvm-dev/mvm/runsummary"
	"github.com/mvm-dev/mvm/vmm"
)

// TestKernelFormats boots the lab's Debian kernel as it comes out of a
// build or a distribution other than as a bare Image: gzip'd (Image.gz,
// made by the Makefile with gzip -9), that file wrapped as an EFI zboot
// vmlinuz (the format Fedora's and Ubuntu's arm64 kernels ship), and a
// kernel build tree holding it as arch/arm64/boot/Image. One quiet
// 1-vCPU boot each; mvm's info log must name the format it recognised.
func TestKernelFormats(t *testing.T) {
	image, gz := env(t, "MVM_LINUX"), env(t, "MVM_LINUX_GZ")
	initrd := testInitrd(t)
	dir := t.TempDir()
	gzData, err := os.ReadFile(gz)
	if err != nil {
		t.Fatal(err)
	}
	zboot := filepath.Join(dir, "vmlinuz-zboot")
	if err := os.WriteFile(zboot, guest.Zboot(gzData, "gzip", 0), 0o644); err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(dir, "linux")
	if err := os.MkdirAll(filepath.Join(tree, "arch", "arm64", "boot"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(image, filepath.Join(tree, "arch", "arm64", "boot", "Image")); err != nil {
		t.Fatal(err)
	}

	// The plain Image first, found in a build tree (one boot for both): the
	// baseline for the time unpacking adds to vmm_setup, and for the memory
	// an unpacked kernel may leave behind (none: its heap copy is dropped
	// once loaded, and the GC at the start of VM.Run returns it; a kept copy
	// would be the Image's 30 MiB). The plain Image by path boots in
	// TestLinuxBoot and every other Linux test.
	var base *runsummary.Summary
	for _, tt := range []struct {
		name, kernel, format, tree string
		log                        []string // in mvm's info log
	}{
		{"build-tree", tree, vmm.FormatImage, tree, []string{"format=Image size=", "tree=" + tree}},
		{"Image.gz", gz, vmm.FormatImageGzip, "", []string{"format=Image.gz"}},
		{"zboot-gzip", zboot, vmm.FormatZbootGzip, "", []string{`format="EFI zboot (gzip)"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(dir, tt.name+".json")
			r := mvm(t, 4*time.Minute, "run", "--kernel", tt.kernel, "--initrd", initrd,
				"--cpus", "1", "--memory", "512M", "--append", "quiet "+noCryptoTests, "--log-level", "info", "--result-json", out)
			if r.code != 0 {
				t.Fatalf("exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if m := nprocRe.FindStringSubmatch(r.stdout); m == nil || m[1] != "1" {
				t.Errorf("guest nproc = %v, want 1\n%s", m, r.stdout)
			}
			for _, s := range tt.log {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("mvm's log does not say %s:\n%s", s, r.stderr)
				}
			}
			for _, l := range strings.Split(r.stderr, "\n") {
				if strings.Contains(l, "msg=kernel ") {
					t.Log(l)
				}
			}
			sum := readSummary(t, out)
			if c := sum.Config; c == nil || c.KernelFormat != tt.format || c.KernelTree != tt.tree {
				t.Errorf("--result-json config %+v, want kernel_format %q, kernel_tree %q", c, tt.format, tt.tree)
			}
			t.Logf("%s: vmm_setup %v, private overhead %.1f MiB, RSS %.1f MiB", tt.name,
				time.Duration(sum.PhasesNS["vmm_setup"]).Round(time.Millisecond),
				float64(sum.Memory.PrivateOverhead)/(1<<20), float64(sum.Memory.RSS)/(1<<20))
			if base == nil {
				base = &sum
				return
			}
			if extra := int64(sum.Memory.PrivateOverhead) - int64(base.Memory.PrivateOverhead); extra > 12<<20 {
				t.Errorf("%s: mvm's private memory is %.1f MiB more than with the plain Image: the unpacked copy was kept", tt.name, float64(extra)/(1<<20))
			}
		})
	}

	// A truncated download of the same vmlinuz: bad input (exit 2), one
	// line, no boot.
	cut := filepath.Join(dir, "vmlinuz-cut")
	whole, err := os.ReadFile(zboot)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cut, whole[:len(whole)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	r := mvm(t, time.Minute, "run", "--kernel", cut, "--initrd", initrd, "--cpus", "1", "--memory", "512M")
	if r.code != 2 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "truncated") || strings.Contains(r.stderr, "goroutine") {
		t.Errorf("truncated zboot: exit %d, stderr %q; want exit 2 and one line saying truncated", r.code, r.stderr)
	}
}

// TestKernelFormatsReboot: a reboot (--on-reset reboot) unpacks a
// compressed kernel again, under the seccomp allow-list, and boots it.
// The kernel is guest/payloads/reboot.s (position-independent) behind an
// arm64 Image header, gzip'd and wrapped as an EFI zboot image: it
// counts its boots in RAM, resets twice and powers off on the third.
func TestKernelFormatsReboot(t *testing.T) {
	code, err := os.ReadFile(payload(t, "reboot.bin"))
	if err != nil {
		t.Fatal(err)
	}
	// booting.rst's header: code0 "b +0x40" to the payload after the
	// header, text_offset 0, image_size 1 MiB (below the payload's RAM
	// counter at +2 MiB), flags LE/4K/anywhere, "ARM\x64" at 56.
	img := make([]byte, 64, 64+len(code))
	le := binary.LittleEndian
	le.PutUint32(img[0:], 0x14000010)
	le.PutUint64(img[16:], 1<<20)
	le.PutUint64(img[24:], 0xa)
	copy(img[56:], "ARM\x64")
	img = append(img, code...)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(img)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	k := filepath.Join(t.TempDir(), "vmlinuz")
	if err := os.WriteFile(k, guest.Zboot(gz.Bytes(), "gzip", 0), 0o644); err != nil {
		t.Fatal(err)
	}
	r := mvm(t, time.Minute, "run", "--kernel", k, "--on-reset", "reboot", "--log-level", "info")
	if r.code != 0 {
		t.Fatalf("exit status %d\nstderr:\n%s", r.code, r.stderr)
	}
	if want := "boot 1\nboot 2\nboot 3\n"; r.stdout != want {
		t.Errorf("console %q, want %q", r.stdout, want)
	}
	if !strings.Contains(r.stderr, `format="EFI zboot (gzip)"`) {
		t.Errorf("mvm's log does not name the zboot format:\n%s", r.stderr)
	}
}
