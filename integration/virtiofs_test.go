//go:build linux && arm64

package integration

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fsGuestCmd mounts the writable share (tag rw) and the read-only one
// (tag ro), reads a host file, writes and syncs a new one, and tries to
// write the read-only share.
const fsGuestCmd = `
mkdir -p /rw /ro
mount -t virtiofs rw /rw && echo "mvm-test: mounted rw"
mount -t virtiofs ro /ro && echo "mvm-test: mounted ro"
echo "mvm-test: in $(sha256sum /rw/in.bin | cut -d' ' -f1)"
echo "mvm-test: roin $(sha256sum /ro/in.bin | cut -d' ' -f1)"
head -c 200000 /dev/urandom >/tmp/out.bin
cp /tmp/out.bin /rw/out.bin && sync && echo "mvm-test: wrote $(sha256sum /tmp/out.bin | cut -d' ' -f1)"
if echo x 2>/tmp/err >/ro/new; then echo "mvm-test: ro write ok"; else echo "mvm-test: ro write failed: $(cat /tmp/err)"; fi
`

// TestVirtioFS: two shares, each served by its own virtiofsd (the lab's
// Debian arm64 virtiofsd, real KVM), with mvm run by an unprivileged user
// (nobody, given /dev/kvm for the test): virtiofsd then builds its
// namespace sandbox in a user namespace of its own. The guest reads host
// files byte-exact, what it writes and syncs to the writable share is in
// the host directory after power-off, owned by that user, a write to the
// read-only share fails with EROFS, and no virtiofsd, socket or runtime
// directory is left. The seccomp filter is on (as by default): the
// vhost-user set-up at the guest's DRIVER_OK runs under it. (As root:
// TestVirtioFSEnds and the command-mode tests.)
func TestVirtioFS(t *testing.T) {
	bin := env(t, "MVM_VIRTIOFSD")
	kvmForNobody(t)
	rw, ro := filepath.Join(publicDir(t), "rw"), filepath.Join(publicDir(t), "ro")
	for _, d := range []string{rw, ro} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	randomFile(t, rw, "in.bin", 300<<10)
	randomFile(t, ro, "in.bin", 5000)
	if err := os.Chown(rw, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	r := mvmCmd(t, 3*time.Minute, asNobody, "run", "--kernel", publicCopy(t, env(t, "MVM_LINUX")),
		"--initrd", publicCopy(t, virtioInitrd(t, fsGuestCmd)),
		"--memory", "256M", "--append", "quiet "+noCryptoTests, "--rng=false", "--seccomp=true", "--virtiofsd", bin,
		"--share", rw+",tag=rw", "--share", ro+",tag=ro,ro,at=/ro")
	if r.code != 0 {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if st, err := os.Stat(filepath.Join(rw, "out.bin")); err == nil {
		if sys := st.Sys().(*syscall.Stat_t); sys.Uid != 65534 || sys.Gid != 65534 {
			t.Errorf("the guest's file is owned by %d:%d on the host, want mvm's user 65534:65534", sys.Uid, sys.Gid)
		}
	}
	out := r.stdout
	for _, m := range []string{"mounted rw", "mounted ro"} {
		if !strings.Contains(out, "mvm-test: "+m) {
			t.Errorf("guest output lacks %q:\n%s", m, out)
		}
	}
	if got, want := field(t, out, `mvm-test: in ([0-9a-f]+)`), sha256File(t, filepath.Join(rw, "in.bin"), 0, -1); got != want {
		t.Errorf("the guest read rw/in.bin as %s, the host file hashes to %s", got, want)
	}
	if got, want := field(t, out, `mvm-test: roin ([0-9a-f]+)`), sha256File(t, filepath.Join(ro, "in.bin"), 0, -1); got != want {
		t.Errorf("the guest read ro/in.bin as %s, the host file hashes to %s", got, want)
	}
	wrote := field(t, out, `mvm-test: wrote ([0-9a-f]+)`)
	if _, err := os.Stat(filepath.Join(rw, "out.bin")); err != nil {
		t.Errorf("the file the guest wrote is not in the host directory: %v", err)
	} else if got := sha256File(t, filepath.Join(rw, "out.bin"), 0, -1); got != wrote {
		t.Errorf("host rw/out.bin hashes to %s, the guest wrote %s", got, wrote)
	}
	if !strings.Contains(out, "mvm-test: ro write failed") || !strings.Contains(out, "Read-only file system") {
		t.Errorf("a write to the read-only share did not fail with EROFS:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(ro, "new")); err == nil {
		t.Error("the read-only share's host directory has the file the guest tried to write")
	}
	noVirtiofsdLeft(t)
}

// TestVirtioFSEnds: the guest writes and syncs a file to a share, then
// the run ends two ways — SIGTERM to mvm while the guest waits (SIGINT
// takes the same path: TestSignalStopsSpinningGuest has both), and a guest
// kernel panic (panic=-1: the kernel resets at once) —
// and each time the file is in the host directory, mvm exits as it should
// and no virtiofsd, socket or runtime directory is left.
func TestVirtioFSEnds(t *testing.T) {
	for _, c := range []struct {
		name   string
		sig    syscall.Signal // 0: the guest panics
		code   int
		append string
		after  string
	}{
		{"SIGTERM", syscall.SIGTERM, 143, "quiet " + noCryptoTests, "sleep 600"},
		{"panic", 0, 0, "quiet panic=-1 " + noCryptoTests, "echo c >/proc/sysrq-trigger"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rw := t.TempDir()
			vm := startMVM(t, "run", "--kernel", env(t, "MVM_LINUX"), "--initrd", virtioInitrd(t, `
mkdir -p /rw
mount -t virtiofs rw /rw
head -c 100000 /dev/urandom >/tmp/out.bin
cp /tmp/out.bin /rw/out.bin && sync && echo "mvm-test: wrote $(sha256sum /tmp/out.bin | cut -d' ' -f1)"
`+c.after+"\n"), "--memory", "256M", "--append", c.append, "--rng=false", "--virtiofsd", env(t, "MVM_VIRTIOFSD"), "--share", rw+",tag=rw")
			wrote := vm.waitFor(`mvm-test: wrote ([0-9a-f]+)`)
			var code int
			if c.sig != 0 {
				code = vm.stop(c.sig)
			} else {
				for line := range vm.lines {
					vm.out.WriteString(line + "\n")
				}
				vm.cmd.Wait()
				vm.timer.Stop()
				code = vm.cmd.ProcessState.ExitCode()
			}
			if wrote == "" {
				t.Fatalf("the guest never reported its write (exit %d)\nstdout:\n%s\nstderr:\n%s", code, vm.output(), vm.stderr.String())
			}
			if code != c.code {
				t.Errorf("exit status %d, want %d\nstderr:\n%s", code, c.code, vm.stderr.String())
			}
			if got := sha256File(t, filepath.Join(rw, "out.bin"), 0, -1); got != wrote {
				t.Errorf("host out.bin hashes to %s, the guest wrote %s", got, wrote)
			}
			noVirtiofsdLeft(t)
		})
	}
}

// TestVirtioFSHostError: mvm fails after starting virtiofsd (the metrics
// port is taken: a host error, exit 1): no virtiofsd or runtime directory
// is left.
func TestVirtioFSHostError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := mvm(t, time.Minute, "run", "--kernel", payload(t, "hello.bin"), "--metrics-addr", l.Addr().String(),
		"--virtiofsd", env(t, "MVM_VIRTIOFSD"), "--share", t.TempDir())
	if r.code != 1 {
		t.Errorf("exit status %d with the metrics port taken, want 1\nstderr:\n%s", r.code, r.stderr)
	}
	noVirtiofsdLeft(t)
}

// TestVirtioFSBadInput: a missing virtiofsd, a missing host directory, a
// tag or guest path given twice: one line, exit 2, nothing started or left.
func TestVirtioFSBadInput(t *testing.T) {
	kernel := payload(t, "hello.bin")
	dir := t.TempDir()
	bin := env(t, "MVM_VIRTIOFSD")
	for _, c := range []struct {
		name, want string
		args       []string
	}{
		{"no-virtiofsd", "does not exist", []string{"--virtiofsd", filepath.Join(dir, "virtiofsd"), "--share", dir}},
		{"no-hostdir", "does not exist", []string{"--virtiofsd", bin, "--share", filepath.Join(dir, "nope")}},
		{"dup-tag", "tag \"a\" is given twice", []string{"--virtiofsd", bin, "--share", dir + ",tag=a", "--share", t.TempDir() + ",tag=a"}},
		{"dup-at", "given twice", []string{"--virtiofsd", bin, "--share", dir + ",at=/x", "--share", t.TempDir() + ",at=/x"}},
		{"bad-option", "unknown option", []string{"--virtiofsd", bin, "--share", dir + ",rx"}},
		// Without root a writable share needs a user namespace for
		// virtiofsd's sandbox (TestVirtioFS has one); on a host that
		// refuses them (here: user.max_user_namespaces=0 for the subtest)
		// it is bad input.
		{"writable-unprivileged-no-userns", "user namespace", []string{"--virtiofsd", bin, "--share", publicDir(t)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var setup func(*exec.Cmd)
			if c.name == "writable-unprivileged-no-userns" {
				setup = asNobody
				noUserNamespaces(t)
			}
			r := mvmCmd(t, 30*time.Second, setup, append([]string{"run", "--kernel", kernel}, c.args...)...)
			oneLineError(t, r, 2, c.want)
			noVirtiofsdLeft(t)
		})
	}
}

// noVirtiofsdLeft fails the test if a virtiofsd process or one of mvm's
// virtiofsd runtime directories exists.
func noVirtiofsdLeft(t *testing.T) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.TrimSpace(string(b)) == "virtiofsd" {
			cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
			t.Errorf("a virtiofsd is still running: %s %q", p, cmdline)
		}
	}
	left, _ := filepath.Glob(filepath.Join(os.TempDir(), "mvm-virtiofs-*"))
	if len(left) > 0 {
		t.Errorf("virtiofsd runtime directories left behind: %v", left)
	}
}

// TestVirtioFSGarbage runs the hostile-driver payload against a virtio-fs
// device (the first slot): self-chaining descriptors, buffers outside RAM,
// out-of-range queue sizes, resets after DRIVER_OK. mvm hands what passes
// its queue checks to a real virtiofsd and must run on to the payload's
// power-off without a panic, and leave no virtiofsd behind. (virtiofsd
// 1.13.2 itself panics on a buffer outside the memory table and exits;
// its message reaches mvm's stderr, which is why only Go's panic and
// goroutine dump count here.)
func TestVirtioFSGarbage(t *testing.T) {
	r := mvm(t, 2*time.Minute, "run", "--kernel", payload(t, "virtio_garbage.bin"), "--memory", "64M",
		"--rng=false", "--virtiofsd", env(t, "MVM_VIRTIOFSD"), "--share", t.TempDir()+",tag=g")
	if r.code != 0 || !strings.Contains(r.stdout, "virtio garbage done") {
		t.Fatalf("exit status %d (want 0 after the payload's power-off)\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.HasPrefix(r.stderr, "panic: ") || strings.Contains(r.stderr, "\npanic: ") || strings.Contains(r.stderr, "goroutine ") {
		t.Fatalf("mvm panicked:\n%s", r.stderr)
	}
	t.Logf("log:\n%s", r.stderr)
	noVirtiofsdLeft(t)
}

// TestVirtioFSFootprint: with a share, guest RAM is the shared memfd: the
// footprint finds it as /memfd:mvm-guest-ram, with resident pages and none
// of them anonymous memory. It logs mvm's memory beyond guest RAM but does
// not hold it to TestFootprint's budgets: in the lab (2026-12-02, two
// runs) a share run had 4.41 MiB anonymous beyond guest RAM against 2.41-
// 2.43 MiB without, the difference all in the executable's bss mapping
// (2068 KiB anonymous there against 96 KiB) — by its size most likely one
// transparent huge page; not pinned down yet.
func TestVirtioFSFootprint(t *testing.T) {
	f := footprintBoot(t, footprintInitrd(t), time.Second, "--virtiofsd", env(t, "MVM_VIRTIOFSD"), "--share", t.TempDir())
	t.Log(f)
	for _, m := range f.top {
		t.Logf("  %6d KiB rss %6d KiB anon  %s", m.rss>>10, m.anon>>10, m.header)
	}
	if f.guest == 0 {
		t.Error("the guest RAM memfd has no resident pages after a boot")
	}
	if f.guestAnon != 0 {
		t.Errorf("%d B of the guest RAM mapping are anonymous: with --share guest RAM should be the shared memfd", f.guestAnon)
	}
	noVirtiofsdLeft(t)
}

// kvmForNobody lets the unprivileged user of asNobody open /dev/kvm (group
// 65534, mode 0660) until the test ends, when root-only 0600 comes back
// (TestNoKVMAccess relies on it).
func kvmForNobody(t *testing.T) {
	t.Helper()
	st, err := os.Stat("/dev/kvm")
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	if err := os.Chown("/dev/kvm", int(sys.Uid), 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod("/dev/kvm", 0o660); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Chown("/dev/kvm", int(sys.Uid), int(sys.Gid))
		os.Chmod("/dev/kvm", st.Mode().Perm())
	})
}

// noUserNamespaces sets user.max_user_namespaces to 0 until the test ends,
// so that no process can make a user namespace.
func noUserNamespaces(t *testing.T) {
	t.Helper()
	const knob = "/proc/sys/user/max_user_namespaces"
	old, err := os.ReadFile(knob)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(knob, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(knob, old, 0o644); err != nil {
			t.Errorf("restore %s: %v", knob, err)
		}
	})
}
