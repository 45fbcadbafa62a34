//go:build linux && arm64

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/guest"
)

// linuxInitrd builds (once per test binary) the busybox initramfs of the
// Linux test guests.
var linuxInitrd = sync.OnceValues(func() (string, error) {
	bb := os.Getenv("MVM_BUSYBOX")
	if bb == "" {
		return "", fmt.Errorf("MVM_BUSYBOX is not set: run the integration tests with 'make lab-test'")
	}
	dir, err := os.MkdirTemp("", "mvm-linux-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "initrd.gz")
	return path, guest.WriteTestInitramfs(bb, path)
})

func testInitrd(t *testing.T) string {
	t.Helper()
	p, err := linuxInitrd()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	nprocRe   = regexp.MustCompile(`mvm-guest: nproc (\d+)`)
	broughtRe = regexp.MustCompile(`mvm-guest: kernel brought up \d+ nodes?, (\d+) CPUs?`)
)

// TestLinuxBoot boots Debian's arm64 kernel with the busybox test init on
// 1, 2, 4 and 8 vCPUs with PSCI in userspace and in KVM; the guest must
// see every CPU and power off.
func TestLinuxBoot(t *testing.T) {
	kernel := env(t, "MVM_LINUX")
	initrd := testInitrd(t)
	for _, mode := range []string{"user", "kernel"} {
		for _, n := range []int{1, 2, 4, 8} {
			t.Run(fmt.Sprintf("psci=%s/cpus=%d", mode, n), func(t *testing.T) {
				r := mvm(t, 4*time.Minute, "run", "--kernel", kernel, "--initrd", initrd,
					"--cpus", strconv.Itoa(n), "--memory", "512M", "--psci", mode, "--append", "quiet")
				if r.code != 0 {
					t.Fatalf("exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
				}
				m := nprocRe.FindStringSubmatch(r.stdout)
				if m == nil || m[1] != strconv.Itoa(n) {
					t.Errorf("guest nproc = %v, want %d\n%s", m, n, r.stdout)
				}
				b := broughtRe.FindStringSubmatch(r.stdout)
				if b == nil || b[1] != strconv.Itoa(n) {
					t.Errorf("kernel brought up %v CPUs, want %d\n%s", b, n, r.stdout)
				}
			})
		}
	}
}
