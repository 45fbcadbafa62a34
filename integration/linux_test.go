//go:build linux && arm64

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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

// initrdWithCmd writes the Linux test guests' initramfs with cmd as its
// /mvm-cmd script (guest.TestInitramfsWith) into a temporary directory.
func initrdWithCmd(tb testing.TB, cmd string) string {
	tb.Helper()
	blob, err := guest.TestInitramfsWith(env(tb, "MVM_BUSYBOX"), "", nil, nil, cmd)
	if err != nil {
		tb.Fatal(err)
	}
	return saveInitrd(tb, blob)
}

// saveInitrd writes an initramfs into a temporary directory.
func saveInitrd(tb testing.TB, blob []byte) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "initrd.gz")
	if err := os.WriteFile(p, blob, 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

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
// 1, 4 and 8 vCPUs with PSCI in userspace and on 4 and 8 with PSCI in KVM
// (with one vCPU there is no CPU_ON, so the two modes boot alike); the
// guest must see every CPU and power off. The 4-vCPU guests also take
// their secondaries offline and online again through sysfs (hotplugCmd,
// checkHotplug) before they power off.
func TestLinuxBoot(t *testing.T) {
	kernel := env(t, "MVM_LINUX")
	plain, hotplug := testInitrd(t), initrdWithCmd(t, hotplugCmd)
	for _, mode := range []string{"user", "kernel"} {
		for _, n := range []int{1, 4, 8} {
			if n == 1 && mode == "kernel" {
				continue
			}
			t.Run(fmt.Sprintf("psci=%s/cpus=%d", mode, n), func(t *testing.T) {
				initrd := plain
				if n == 4 {
					initrd = hotplug
				}
				r := mvm(t, 4*time.Minute, "run", "--kernel", kernel, "--initrd", initrd,
					"--cpus", strconv.Itoa(n), "--memory", "512M", "--psci", mode, "--append", "quiet "+noCryptoTests)
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
				if n == 4 {
					checkHotplug(t, r.stdout)
				}
			})
		}
	}
}

// hotplugCmd takes CPUs 1-3 of a 4-vCPU guest offline and back online
// twice (Linux's CPU_OFF, then CPU_ON of a vCPU that has run), then
// runs a task on each of them.
const hotplugCmd = `for r in 1 2; do
	for c in 1 2 3; do echo 0 > /sys/devices/system/cpu/cpu$c/online || echo "mvm-hotplug: offline $c failed"; done
	echo "mvm-hotplug: round $r off $(cat /sys/devices/system/cpu/online)"
	for c in 1 2 3; do echo 1 > /sys/devices/system/cpu/cpu$c/online || echo "mvm-hotplug: online $c failed"; done
	echo "mvm-hotplug: round $r on $(cat /sys/devices/system/cpu/online)"
done
for c in 1 2 3; do echo "mvm-hotplug: task for $c ran on $(taskset -c $c cat /proc/self/stat | sed 's/^.*) //' | awk '{print $37}')"; done`

// checkHotplug checks the lines hotplugCmd printed: every round took CPUs
// 1-3 offline and back, and each ran a task afterwards. With PSCI in mvm
// each offline is a CPU_OFF that parks the vCPU and each online a CPU_ON
// that starts a vCPU which has run before (mvm rearms it while it is
// parked, vcpu.rearm).
func checkHotplug(t *testing.T, stdout string) {
	t.Helper()
	out := strings.ReplaceAll(stdout, "\r", "") // the serial console's line ends
	var want []string
	for round := 1; round <= 2; round++ {
		want = append(want, fmt.Sprintf("mvm-hotplug: round %d off 0\n", round), fmt.Sprintf("mvm-hotplug: round %d on 0-3\n", round))
	}
	for c := 1; c <= 3; c++ {
		want = append(want, fmt.Sprintf("mvm-hotplug: task for %d ran on %d\n", c, c))
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("guest did not print %q\nstdout:\n%s", w, stdout)
		}
	}
	if strings.Contains(out, "failed") {
		t.Errorf("a hotplug step failed\nstdout:\n%s", stdout)
	}
}
