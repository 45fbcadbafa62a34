//go:build linux && arm64

package integration

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/devices/virtio"
	"github.com/mvm-dev/mvm/guest"
)

// virtioInitrd writes a test initramfs with the virtio modules and cmd as
// /mvm-cmd, and returns its path.
func virtioInitrd(t testing.TB, cmd string) string {
	return virtioInitrdWith(t, nil, cmd)
}

// virtioInitrdWith is virtioInitrd with extra host files (archive path ->
// host path).
func virtioInitrdWith(t testing.TB, files map[string]string, cmd string) string {
	t.Helper()
	blob, err := guest.TestInitramfsWith(env(t, "MVM_BUSYBOX"), env(t, "MVM_MODULES"), guest.VirtioModules, files, cmd)
	if err != nil {
		t.Fatal(err)
	}
	return saveInitrd(t, blob)
}

// randomFile writes n random bytes to dir/name.
func randomFile(t testing.TB, dir, name string, n int) string {
	t.Helper()
	data := make([]byte, n)
	rand.Read(data)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func sha256File(t testing.TB, path string, off, n int64) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	var r io.Reader = f
	if n >= 0 {
		r = io.NewSectionReader(f, off, n)
	}
	if _, err := io.Copy(h, r); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func field(t *testing.T, out, re string) string {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(out)
	if m == nil {
		t.Errorf("guest output has no match for %q", re)
		return ""
	}
	return m[1]
}

// diskGuestCmd is what the guest of TestVirtioDisk does: read the ext4
// disk, write and flush random data to the raw one, try to write the
// read-only one, read the rng.
const diskGuestCmd = `
mkdir -p /mnt
mount -t ext4 -o ro /dev/vda /mnt && echo "mvm-test: ext4 busybox $(sha256sum /mnt/bin/busybox | cut -d' ' -f1)"
echo "mvm-test: vdb size $(blockdev --getsize64 /dev/vdb) ro $(blockdev --getro /dev/vdb)"
echo "mvm-test: vdc ro $(blockdev --getro /dev/vdc)"
head -c 8192 /dev/urandom >/tmp/data
dd if=/tmp/data of=/dev/vdb bs=4096 seek=3 conv=fsync 2>/dev/null && echo "mvm-test: flushed $(sha256sum /tmp/data | cut -d' ' -f1)"
if dd if=/dev/zero of=/dev/vdc bs=512 count=1 conv=fsync 2>/dev/null; then echo "mvm-test: ro write ok"; else echo "mvm-test: ro write failed"; fi
echo "mvm-test: rng $(cat /sys/class/misc/hw_random/rng_current)"
echo "mvm-test: rngbytes $(head -c 32 /dev/hwrng | hexdump -v -e '/1 "%02x"')"
`

// TestVirtioDisk boots Linux with an ext4 disk made on the host (read-only),
// a raw disk and a read-only raw disk, plus the rng: the guest reads the
// ext4 file system, writes and flushes the raw disk (the data is in the
// host file after power-off), cannot write the read-only disk (its file is
// byte-identical afterwards), and gets random bytes.
func TestVirtioDisk(t *testing.T) {
	dir := t.TempDir()
	root := publicCopy(t, env(t, "MVM_ROOTFS"))
	scratch := filepath.Join(dir, "scratch.img")
	if err := os.WriteFile(scratch, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	ro := randomFile(t, dir, "ro.img", 64<<10)
	rootSum, roSum := sha256File(t, root, 0, -1), sha256File(t, ro, 0, -1)

	r := mvm(t, 3*time.Minute, "run", "--kernel", env(t, "MVM_LINUX"), "--initrd", virtioInitrd(t, diskGuestCmd),
		"--memory", "256M", "--append", "quiet "+noCryptoTests, "--disk", root+",ro", "--disk", scratch, "--disk", ro+",ro")
	if r.code != 0 {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	out := r.stdout
	if got, want := field(t, out, `mvm-test: ext4 busybox ([0-9a-f]+)`), sha256File(t, env(t, "MVM_BUSYBOX"), 0, -1); got != want {
		t.Errorf("busybox read from the ext4 disk hashes to %s, the host's to %s", got, want)
	}
	if got := field(t, out, `mvm-test: vdb size (\d+ ro \d)`); got != "1048576 ro 0" {
		t.Errorf("vdb: size and ro %q, want 1048576 ro 0", got)
	}
	if got := field(t, out, `mvm-test: vdc ro (\d)`); got != "1" {
		t.Errorf("vdc (ro) reports ro %q", got)
	}
	if got := field(t, out, `mvm-test: flushed ([0-9a-f]+)`); got != sha256File(t, scratch, 3*4096, 8192) {
		t.Errorf("the blocks the guest flushed are not in the host file after power-off")
	}
	if !strings.Contains(out, "mvm-test: ro write failed") {
		t.Errorf("a write to the read-only disk did not fail:\n%s", out)
	}
	if sha256File(t, ro, 0, -1) != roSum || sha256File(t, root, 0, -1) != rootSum {
		t.Error("a read-only disk image changed")
	}
	if got := field(t, out, `mvm-test: rng (\S+)`); !strings.HasPrefix(got, "virtio_rng") {
		t.Errorf("hw_random current source %q, want virtio_rng.N", got)
	}
	b := field(t, out, `mvm-test: rngbytes ([0-9a-f]*)`)
	if len(b) != 64 || b == strings.Repeat("0", 64) {
		t.Errorf("rng gave %q, want 32 non-zero bytes", b)
	}
}

// TestVirtioRootDiskSIGTERM boots with its root on the ext4 disk (the
// initramfs loads the modules and switch_roots); the root's init writes and
// flushes blocks of a second disk, then mvm is stopped with SIGTERM: the
// flushed blocks are in the host file.
func TestVirtioRootDiskSIGTERM(t *testing.T) {
	dir := t.TempDir()
	root := publicCopy(t, env(t, "MVM_ROOTFS"))
	scratch := filepath.Join(dir, "scratch.img")
	if err := os.WriteFile(scratch, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	vm := startMVM(t, "run", "--kernel", env(t, "MVM_LINUX"), "--initrd", virtioInitrd(t, ""),
		"--memory", "256M", "--append", "quiet mvm.root=/dev/vda "+noCryptoTests, "--disk", root+",ro", "--disk", scratch, "--rng=false")
	flushed := vm.waitFor(`mvm-root: flushed ([0-9a-f]+)`)
	code := vm.stop(syscall.SIGTERM)
	out := vm.output()
	if flushed == "" {
		t.Fatalf("the guest never reported its flush (exit %d)\nstdout:\n%s\nstderr:\n%s", code, out, vm.stderr.String())
	}
	if !strings.Contains(out, "mvm-root: root /dev/root ext4") && !strings.Contains(out, "mvm-root: root /dev/vda ext4") {
		t.Errorf("the switched root is not the ext4 disk:\n%s", out)
	}
	if code != 143 {
		t.Errorf("exit status %d after SIGTERM, want 143\nstderr:\n%s", code, vm.stderr.String())
	}
	if got := sha256File(t, scratch, 16*512, 4096); got != flushed {
		t.Errorf("the blocks flushed before SIGTERM are not in the host file (hash %s, guest wrote %s)", got, flushed)
	}
}

// TestVirtioBadInput: each bad device option is one line and a non-zero
// exit, before any guest runs.
func TestVirtioBadInput(t *testing.T) {
	kernel := payload(t, "hello.bin")
	dir := publicDir(t)
	unwritable := filepath.Join(dir, "unwritable.img")
	if err := os.WriteFile(unwritable, make([]byte, 4096), 0o444); err != nil {
		t.Fatal(err)
	}
	odd := filepath.Join(dir, "odd.img")
	os.WriteFile(odd, make([]byte, 1000), 0o644)
	many := []string{"run", "--kernel", kernel}
	for range 32 {
		many = append(many, "--disk", odd)
	}
	for _, c := range []struct {
		name   string
		nobody bool
		code   int
		want   string
		args   []string
	}{
		{"missing", false, 2, "does not exist", []string{"--disk", filepath.Join(dir, "nope.img")}},
		{"directory", false, 2, "is a directory", []string{"--disk", dir}},
		{"size", false, 2, "multiple of 512", []string{"--disk", odd}},
		{"unwritable", true, 2, "not writable", []string{"--disk", unwritable}},
		{"disk-option", false, 2, "unknown option", []string{"--disk", odd + ",rx"}},
		{"net-spec", false, 2, "KEY=VALUE", []string{"--net", "tap0"}},
		{"net-mac", false, 2, "bad MAC", []string{"--net", "tap=tap0,mac=12:34"}},
		{"missing-tap", false, 1, "does not exist", []string{"--net", "tap=mvmnotap9"}},
		{"too-many", false, 2, "more than the 32", many[3:]},
	} {
		t.Run(c.name, func(t *testing.T) {
			var setup func(*exec.Cmd)
			if c.nobody {
				setup = asNobody
			}
			r := mvmCmd(t, 30*time.Second, setup, append([]string{"run", "--kernel", kernel}, c.args...)...)
			oneLineError(t, r, c.code, c.want)
		})
	}
}

// runningMVM is an mvm process whose console the test reads as it runs.
type runningMVM struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string
	out    strings.Builder
	stderr bytes.Buffer
	timer  *time.Timer
}

// startMVM starts mvm with args; it is stopped after 3 minutes.
func startMVM(t *testing.T, args ...string) *runningMVM {
	t.Helper()
	vm := &runningMVM{t: t, cmd: exec.Command(env(t, "MVM_BIN"), args...), lines: make(chan string, 1024)}
	stdout, err := vm.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	vm.cmd.Stderr = &vm.stderr
	if err := vm.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// On a hang, first SIGUSR1 (mvm prints where each vCPU is), then
	// SIGQUIT (the Go runtime prints every goroutine's stack): the
	// failure shows both.
	vm.timer = time.AfterFunc(3*time.Minute, func() {
		vm.cmd.Process.Signal(syscall.SIGUSR1)
		time.Sleep(3 * time.Second)
		vm.cmd.Process.Signal(syscall.SIGQUIT)
		time.Sleep(5 * time.Second)
		vm.cmd.Process.Kill()
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			vm.lines <- sc.Text()
		}
		close(vm.lines)
	}()
	return vm
}

// waitFor reads console lines until one matches re and returns its first
// group ("" if the console ends first).
func (vm *runningMVM) waitFor(re string) string {
	r := regexp.MustCompile(re)
	for line := range vm.lines {
		fmt.Fprintln(&vm.out, line)
		if m := r.FindStringSubmatch(line); m != nil {
			if len(m) > 1 {
				return m[1]
			}
			return m[0]
		}
	}
	return ""
}

// stop sends sig, waits for the exit and returns the status.
func (vm *runningMVM) stop(sig syscall.Signal) int {
	vm.cmd.Process.Signal(sig)
	for line := range vm.lines {
		fmt.Fprintln(&vm.out, line)
	}
	vm.cmd.Wait()
	vm.timer.Stop()
	return vm.cmd.ProcessState.ExitCode()
}

func (vm *runningMVM) output() string { return vm.out.String() }

// netGuestCmd configures the guest's NIC on 192.0.2.0/24 (documentation
// addresses), fetches a file from the lab side, serves one of its own and
// waits to be stopped.
const netGuestCmd = `
ip link set eth0 up
ip addr add 192.0.2.2/24 dev eth0
echo "mvm-net: mac $(cat /sys/class/net/eth0/address)"
wget -q -O /tmp/blob http://192.0.2.1:8080/blob && echo "mvm-net: got $(sha256sum /tmp/blob | cut -d' ' -f1)"
mkdir -p /www
head -c 262144 /dev/urandom >/www/g
echo "mvm-net: serving $(sha256sum /www/g | cut -d' ' -f1)"
httpd -p 8080 -h /www
echo "mvm-net: ready"
sleep 600
`

// labTap creates tap name on the lab side with addr, up, removed at the
// end of the test.
func labTap(t testing.TB, name, addr string) {
	t.Helper()
	for _, c := range [][]string{{"tunctl", "-t", name}, {"ip", "addr", "add", addr, "dev", name}, {"ip", "link", "set", name, "up"}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	t.Cleanup(func() { exec.Command("tunctl", "-d", name).Run() })
}

// TestVirtioNet: a virtio-net NIC on a lab-side tap. The guest fetches a
// file from an HTTP server on the lab side and the lab side one from the
// guest's; the guest's MAC is the stable default. While the VM runs, a
// second mvm asking for its writable disk is refused (advisory lock).
func TestVirtioNet(t *testing.T) {
	const tap = "mvmtap0"
	labTap(t, tap, "192.0.2.1/24")
	www := t.TempDir()
	blob := randomFile(t, www, "blob", 1<<20)
	httpd := exec.Command("httpd", "-f", "-p", "192.0.2.1:8080", "-h", www)
	if err := httpd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { httpd.Process.Kill(); httpd.Wait() })
	disk := filepath.Join(t.TempDir(), "disk.img")
	os.WriteFile(disk, make([]byte, 64<<10), 0o644)

	vm := startMVM(t, "run", "--kernel", env(t, "MVM_LINUX"), "--initrd", virtioInitrd(t, netGuestCmd),
		"--memory", "256M", "--append", "quiet "+noCryptoTests, "--net", "tap="+tap, "--disk", disk)
	ready := vm.waitFor(`mvm-net: ready`)
	var fetched []byte
	var ferr error
	if ready != "" {
		fetched, ferr = httpGet("http://192.0.2.2:8080/g")
		// The image is held writable: a second mvm must not get it.
		r := mvm(t, 30*time.Second, "run", "--kernel", payload(t, "hello.bin"), "--disk", disk)
		oneLineError(t, r, 1, "in use")
	}
	code := vm.stop(syscall.SIGTERM)
	out := vm.output()
	if ready == "" {
		t.Fatalf("the guest never got its network up (exit %d)\nstdout:\n%s\nstderr:\n%s", code, out, vm.stderr.String())
	}
	if got, want := field(t, out, `mvm-net: mac (\S+)`), virtio.DefaultMAC(tap, 0).String(); got != want {
		t.Errorf("guest MAC %s, want the default %s", got, want)
	}
	if got := field(t, out, `mvm-net: got ([0-9a-f]+)`); got != sha256File(t, blob, 0, -1) {
		t.Errorf("the file the guest fetched from the lab side hashes to %q, not the file's hash", got)
	}
	if ferr != nil {
		t.Fatalf("fetch from the guest: %v", ferr)
	}
	sum := sha256.Sum256(fetched)
	if got := field(t, out, `mvm-net: serving ([0-9a-f]+)`); got != hex.EncodeToString(sum[:]) || len(fetched) != 262144 {
		t.Errorf("the file fetched from the guest (%d bytes) does not match what it served", len(fetched))
	}
	if code != 143 {
		t.Errorf("exit status %d after SIGTERM, want 143\nstderr:\n%s", code, vm.stderr.String())
	}
}

func httpGet(url string) ([]byte, error) {
	c := &http.Client{Timeout: 60 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// TestVirtioGarbage runs the hostile-driver payload against a disk, a NIC
// and the rng: mvm keeps running to the guest's power-off, logs each kind
// of driver error once and counts them, and never panics.
func TestVirtioGarbage(t *testing.T) {
	const tap = "mvmtap1"
	labTap(t, tap, "192.0.2.129/25")
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk.img")
	os.WriteFile(disk, make([]byte, 64<<10), 0o644)
	res := filepath.Join(dir, "result.json")
	r := mvm(t, 2*time.Minute, "run", "--kernel", payload(t, "virtio_garbage.bin"), "--memory", "64M",
		"--disk", disk, "--net", "tap="+tap, "--result-json", res)
	if r.code != 0 || !strings.Contains(r.stdout, "virtio garbage done") {
		t.Fatalf("exit status %d (want 0 after the payload's power-off)\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
		t.Fatalf("mvm panicked:\n%s", r.stderr)
	}
	if n := strings.Count(r.stderr, "\n"); n > 60 {
		t.Errorf("%d lines of log for one payload: driver errors are not logged once per kind\n%s", n, r.stderr)
	}
	sum := readJSON[struct {
		Virtio uint64 `json:"virtio_problems"`
	}](t, res)
	if sum.Virtio < 10 {
		t.Errorf("virtio_problems = %d, want the payload's errors counted", sum.Virtio)
	}
	t.Logf("virtio_problems %d; log:\n%s", sum.Virtio, r.stderr)
}
