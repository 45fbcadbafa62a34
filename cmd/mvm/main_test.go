package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/mvm-dev/mvm/vmm"
)

// mvmBin is the mvm binary TestMain builds once for the tests that run it.
var mvmBin string

// goVersion is the toolchain version that built mvmBin.
var goVersion string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "mvm-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	mvmBin = filepath.Join(dir, "mvm")
	build := exec.Command(goCmd, "build", "-o", mvmBin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build mvm: %v\n%s", err, out)
		return 1
	}
	out, err := exec.Command(goCmd, "env", "GOVERSION").Output()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go env GOVERSION: %v\n", err)
		return 1
	}
	goVersion = strings.TrimSpace(string(out))
	return m.Run()
}

type result struct {
	code           int
	stdout, stderr string
}

// mvm runs the binary in dir with args.
func mvm(t *testing.T, dir string, args ...string) result {
	t.Helper()
	cmd := exec.Command(mvmBin, args...)
	cmd.Dir = dir
	cmd.Stdin = nil // /dev/null: not a terminal
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("run mvm %s: %v", strings.Join(args, " "), err)
	}
	return r
}

func TestVersion(t *testing.T) {
	r := mvm(t, t.TempDir(), "version")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("mvm version: exit %d, stderr %q", r.code, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "mvm ") || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("mvm version printed %q, want one line starting \"mvm \"", r.stdout)
	}
	if !strings.Contains(r.stdout, " "+goVersion) {
		t.Errorf("mvm version printed %q, want the Go version %s", r.stdout, goVersion)
	}
	if !strings.Contains(r.stdout, runtime.GOOS+"/"+runtime.GOARCH) {
		t.Errorf("mvm version printed %q, want %s/%s", r.stdout, runtime.GOOS, runtime.GOARCH)
	}
}

// kvmUsable reports whether this process can open /dev/kvm, which is
// what mvm caps should report as "/dev/kvm" available.
func kvmUsable() bool {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

type capsJSON struct {
	Host  string `json:"host"`
	Items []struct {
		Name      string `json:"name"`
		Available bool   `json:"available"`
		Value     string `json:"value"`
		Disables  string `json:"disables"`
	} `json:"capabilities"`
}

func TestCapsJSON(t *testing.T) {
	r := mvm(t, t.TempDir(), "caps", "--json")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("mvm caps --json: exit %d, stderr %q", r.code, r.stderr)
	}
	var caps capsJSON
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	if err := dec.Decode(&caps); err != nil {
		t.Fatalf("caps --json output does not parse: %v\n%s", err, r.stdout)
	}
	if want := runtime.GOOS + "/" + runtime.GOARCH; caps.Host != want {
		t.Errorf("host = %q, want %q", caps.Host, want)
	}
	avail := map[string]bool{}
	for _, c := range caps.Items {
		if _, dup := avail[c.Name]; dup {
			t.Errorf("%q listed twice", c.Name)
		}
		avail[c.Name] = c.Available
		if !c.Available && c.Disables == "" {
			t.Errorf("%q unavailable without saying what that disables", c.Name)
		}
	}
	kvm, ok := avail["/dev/kvm"]
	if !ok {
		t.Fatalf("no /dev/kvm item in %+v", caps.Items)
	}
	if want := kvmUsable(); kvm != want {
		t.Errorf("/dev/kvm available = %v, but opening it here gives %v", kvm, want)
	}
	if kvm {
		arm, ok := avail["arm64 host"]
		if !ok {
			t.Errorf("no \"arm64 host\" item")
		} else if arm != (runtime.GOARCH == "arm64") {
			t.Errorf("arm64 host available = %v on %s", arm, runtime.GOARCH)
		}
		if runtime.GOARCH != "arm64" {
			// arm64-only KVM features cannot be present on another host.
			for _, name := range []string{"vGICv3", "SMCCC filter", "in-kernel PSCI 0.2+"} {
				if a, ok := avail[name]; ok && a {
					t.Errorf("%q available on %s", name, runtime.GOARCH)
				}
			}
		}
	}
}

func TestCapsTable(t *testing.T) {
	r := mvm(t, t.TempDir(), "caps")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("mvm caps: exit %d, stderr %q", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if f := strings.Fields(lines[0]); len(f) != 2 || f[0] != "host" || f[1] != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("first line %q, want host and %s/%s", lines[0], runtime.GOOS, runtime.GOARCH)
	}
	// The table has a line per JSON item, in the same order.
	var caps capsJSON
	if err := json.Unmarshal([]byte(mvm(t, t.TempDir(), "caps", "--json").stdout), &caps); err != nil {
		t.Fatal(err)
	}
	if len(lines) != len(caps.Items)+1 {
		t.Fatalf("%d table lines for %d items:\n%s", len(lines), len(caps.Items), r.stdout)
	}
	for i, c := range caps.Items {
		l := lines[i+1]
		state := "yes"
		if !c.Available {
			state = "no"
		}
		if !strings.HasPrefix(l, c.Name) || !strings.Contains(l[len(c.Name):], " "+state) {
			t.Errorf("line %q, want %q then %q", l, c.Name, state)
		}
		if !c.Available && c.Disables != "" && !strings.Contains(l, c.Disables) {
			t.Errorf("line %q does not say what %q disables", l, c.Name)
		}
	}
	if r := mvm(t, t.TempDir(), "caps", "extra"); r.code != 2 {
		t.Errorf("mvm caps extra: exit %d, want 2", r.code)
	}
}

func TestRunHelp(t *testing.T) {
	r := mvm(t, t.TempDir(), "run", "--help")
	if r.code != 0 {
		t.Fatalf("mvm run --help: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, s := range []string{"--kernel", "--cpus", "--memory", "--initrd", "--console", "--psci", "--on-reset", "--pmu", "KVM_CAP_ARM_PMU_V3", "PL031", "--serial", "PL011", "ttyAMA0", "Example", "--profile=light"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("mvm run --help does not mention %q", s)
		}
	}
}

// arm64Payload is a flat binary of real AArch64 code: a valid --kernel.
func arm64Payload() []byte {
	var b []byte
	for _, insn := range []uint32{0xd503207f, 0x17ffffff} { // wfi; b .-4
		b = binary.LittleEndian.AppendUint32(b, insn)
	}
	return b
}

// testImage is an arm64 Image of size bytes: the booting.rst header
// (image_size 16 MiB, 4K pages, "ARM\x64" at 56) and filler.
func testImage(size int) []byte {
	b := make([]byte, size)
	binary.LittleEndian.PutUint64(b[16:], 16<<20)
	binary.LittleEndian.PutUint64(b[24:], 0xa)
	copy(b[56:], "ARM\x64")
	for i := 64; i < size; i++ {
		b[i] = byte(i * 31)
	}
	return b
}

// lzmaZboot is the start of an EFI zboot vmlinuz (Linux
// drivers/firmware/efi/libstub/zboot-header.S: "MZ", "zimg" at 4, le32
// payload offset and size at 8 and 12, the compression's name at 24)
// whose payload is lzma-compressed.
func lzmaZboot() []byte {
	b := make([]byte, 0x40)
	copy(b, "MZ")
	copy(b[4:], "zimg")
	binary.LittleEndian.PutUint32(b[8:], 0x40)
	binary.LittleEndian.PutUint32(b[12:], 16)
	copy(b[24:], "lzma")
	return append(b, "\x5d\x00\x00\x80\x00lzma data\x00\x00"...)
}

func gzipBytes(t *testing.T, data []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// inputs writes the kernel files the run tests use into a directory of
// their own (not the directory mvm runs in).
func inputs(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	files := map[string][]byte{
		"payload.bin": arm64Payload(),
		"empty":       nil,
		"vmlinux":     append([]byte("\x7fELF\x02\x01\x01\x00"), make([]byte, 56)...),
		// A gzip'd file that is no Image, a truncated Image.gz, and an
		// EFI zboot vmlinuz with an lzma payload mvm does not unpack.
		"notes.gz":       gzipBytes(t, []byte("release notes, not a kernel\n")),
		"Image-cut.gz":   gzipBytes(t, testImage(1<<20))[:2000],
		"vmlinuz-lzma":   lzmaZboot(),
		"linux/Makefile": []byte("VERSION = 6\n"),
	}
	paths := map[string]string{"dir": dir, "missing": filepath.Join(dir, "missing"), "tree": filepath.Join(dir, "linux")}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths[name] = p
	}
	return paths
}

// checkFailure asserts the shape of every failed mvm run: the exit status,
// exactly one line on stderr starting "mvm: " and mentioning says, no
// panic, and nothing written to the working directory.
func checkFailure(t *testing.T, dir string, r result, code int, says ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit status %d, want %d (stderr %q)", r.code, code, r.stderr)
	}
	if !strings.HasPrefix(r.stderr, "mvm: ") || !strings.HasSuffix(r.stderr, "\n") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr %q, want exactly one line starting \"mvm: \"", r.stderr)
	}
	for _, bad := range []string{"panic", "goroutine"} {
		if strings.Contains(r.stderr+r.stdout, bad) {
			t.Errorf("output mentions %q:\n%s%s", bad, r.stdout, r.stderr)
		}
	}
	for _, s := range says {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr %q does not mention %q", r.stderr, s)
		}
	}
	if r.stdout != "" {
		t.Errorf("stdout %q, want nothing", r.stdout)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("the failed run left %s in its working directory", e.Name())
	}
}

func TestRunBadInput(t *testing.T) {
	in := inputs(t)
	k := in["payload.bin"]
	tests := []struct {
		name string
		args []string
		code int
		says []string
	}{
		{"no --kernel", []string{"run"}, 2, []string{"--kernel"}},
		{"no --kernel with other flags", []string{"run", "--cpus", "2"}, 2, []string{"--kernel"}},
		{"unknown flag", []string{"run", "--kernel", k, "--bogus"}, 2, []string{"--bogus"}},
		{"argument", []string{"run", "--kernel", k, "extra"}, 2, []string{"extra"}},
		{"unknown command", []string{"frobnicate"}, 2, []string{"frobnicate"}},
		{"--cpus 0", []string{"run", "--kernel", k, "--cpus", "0"}, 2, []string{"--cpus"}},
		{"--cpus -1", []string{"run", "--kernel", k, "--cpus=-1"}, 2, []string{"--cpus"}},
		{"--cpus 100000", []string{"run", "--kernel", k, "--cpus", "100000"}, 2, []string{"--cpus"}},
		{"--cpus abc", []string{"run", "--kernel", k, "--cpus", "abc"}, 2, []string{"--cpus"}},
		{"--memory 1K", []string{"run", "--kernel", k, "--memory", "1K"}, 2, []string{"--memory"}},
		{"--memory abc", []string{"run", "--kernel", k, "--memory", "abc"}, 2, []string{"--memory"}},
		{"--memory 100T", []string{"run", "--kernel", k, "--memory", "100T"}, 2, []string{"--memory"}},
		{"--memory overflow", []string{"run", "--kernel", k, "--memory", "99999999999T"}, 2, []string{"--memory"}},
		{"--memory not 64K", []string{"run", "--kernel", k, "--memory", "100000000"}, 2, []string{"--memory"}},
		{"--psci bogus", []string{"run", "--kernel", k, "--psci", "bogus"}, 2, []string{"--psci", "bogus"}},
		{"--on-reset bogus", []string{"run", "--kernel", k, "--on-reset", "bogus"}, 2, []string{"--on-reset", "bogus"}},
		{"--console bogus", []string{"run", "--kernel", k, "--console", "bogus"}, 2, []string{"--console", "bogus"}},
		{"--console file: without a path", []string{"run", "--kernel", k, "--console", "file:"}, 2, []string{"--console"}},
		{"--log-level bogus", []string{"run", "--kernel", k, "--log-level", "loud"}, 2, []string{"--log-level"}},
		// A named file that is missing, unreadable or of the wrong kind is
		// bad input too, found before any host probe.
		{"missing kernel", []string{"run", "--kernel", in["missing"]}, 2, []string{in["missing"], "does not exist"}},
		{"kernel is a directory", []string{"run", "--kernel", in["dir"]}, 2, []string{"directory"}},
		{"empty kernel", []string{"run", "--kernel", in["empty"]}, 2, []string{"empty"}},
		{"ELF kernel", []string{"run", "--kernel", in["vmlinux"]}, 2, []string{"ELF"}},
		{"gzip'd non-kernel", []string{"run", "--kernel", in["notes.gz"]}, 2, []string{"gzip", "Image.gz", "EFI zboot", "build tree"}},
		{"truncated Image.gz", []string{"run", "--kernel", in["Image-cut.gz"]}, 2, []string{"truncated"}},
		{"zboot with lzma", []string{"run", "--kernel", in["vmlinuz-lzma"]}, 2, []string{"EFI zboot", `"lzma"`, "gzip and zstd"}},
		{"unbuilt kernel tree", []string{"run", "--kernel", in["tree"]}, 2, []string{"arch/arm64/boot/Image"}},
		{"missing initrd", []string{"run", "--kernel", k, "--initrd", in["missing"]}, 2, []string{"initrd", "does not exist"}},
		{"initrd is a directory", []string{"run", "--kernel", k, "--initrd", in["dir"]}, 2, []string{"initrd", "directory"}},
		{"console none, missing kernel", []string{"run", "--kernel", in["missing"], "--console", "none"}, 2, []string{"does not exist"}},
		{"--disk missing", []string{"run", "--kernel", k, "--disk", in["missing"]}, 2, []string{"--disk", in["missing"], "does not exist"}},
		{"--disk missing,ro", []string{"run", "--kernel", k, "--disk", in["missing"] + ",ro"}, 2, []string{"--disk", in["missing"], "does not exist"}},
		{"--disk a directory", []string{"run", "--kernel", k, "--disk", in["dir"]}, 2, []string{"--disk", "directory"}},
		{"--disk not whole sectors", []string{"run", "--kernel", k, "--disk", in["payload.bin"]}, 2, []string{"--disk", "multiple of 512"}},
		{"--disk empty", []string{"run", "--kernel", k, "--disk", in["empty"]}, 2, []string{"--disk", in["empty"]}},
		{"--console in a missing directory", []string{"run", "--kernel", k, "--console", "file:" + filepath.Join(in["missing"], "c.log")}, 2, []string{"--console file:" + filepath.Join(in["missing"], "c.log"), "does not exist"}},
		{"--console a directory", []string{"run", "--kernel", k, "--console", "file:" + in["dir"]}, 2, []string{"--console file:" + in["dir"], "directory"}},
		{"--console under a file", []string{"run", "--kernel", k, "--console", "file:" + filepath.Join(in["payload.bin"], "c.log")}, 2, []string{"--console file:", "not a directory"}},
		{"--metrics-addr no port", []string{"run", "--kernel", k, "--metrics-addr", "notanaddr"}, 2, []string{"--metrics-addr", "notanaddr"}},
		{"--metrics-addr port too big", []string{"run", "--kernel", k, "--metrics-addr", "127.0.0.1:65536"}, 2, []string{"--metrics-addr", "65536"}},
		{"--metrics-addr bad host", []string{"run", "--kernel", k, "--metrics-addr", "no_such host:9100"}, 2, []string{"--metrics-addr", "no_such host"}},
		{"--result-json in a missing directory", []string{"run", "--kernel", k, "--result-json", filepath.Join(in["missing"], "r.json")}, 2, []string{"--result-json", filepath.Join(in["missing"], "r.json")}},
		{"--report a directory", []string{"run", "--kernel", k, "--report", in["dir"]}, 2, []string{"--report", "directory"}},
		{"--profile-out in a missing directory", []string{"run", "--kernel", k, "--profile", "--profile-out", filepath.Join(in["missing"], "p.txt")}, 2, []string{"--profile-out", "does not exist"}},
		{"--guest-symbols missing", []string{"run", "--kernel", k, "--profile", "--guest-symbols", in["missing"]}, 2, []string{"--guest-symbols", in["missing"], "does not exist"}},
		{"--guest-symbols a directory", []string{"run", "--kernel", k, "--profile", "--guest-symbols", in["dir"]}, 2, []string{"--guest-symbols", "directory"}},
		{"--guest-symbols not symbols", []string{"run", "--kernel", k, "--profile", "--guest-symbols", in["payload.bin"]}, 2, []string{"--guest-symbols", in["payload.bin"]}},
		// Output files named relative to the working directory (which
		// checkFailure sees empty afterwards) are not created when any
		// input is bad.
		{"outputs and a missing disk", []string{"run", "--kernel", k, "--disk", in["missing"], "--console", "file:c.log",
			"--result-json", "r.json", "--report", "r.html", "--profile", "--profile-out", "p.txt"}, 2, []string{"--disk", in["missing"]}},
		{"outputs and a bad --metrics-addr", []string{"run", "--kernel", k, "--metrics-addr", "notanaddr", "--console", "file:c.log",
			"--result-json", "r.json", "--report", "r.html"}, 2, []string{"--metrics-addr"}},
		// Command mode's own flags: 125 with a command, as all its bad input.
		{"--rootfs missing", []string{"run", "--kernel", k, "--rootfs", in["missing"], "--", "true"}, 125, []string{"--rootfs " + in["missing"], "no such file"}},
		{"--rootfs a file", []string{"run", "--kernel", k, "--rootfs", in["payload.bin"], "--", "true"}, 125, []string{"--rootfs", "not a directory"}},
		{"--rootfs without /proc", []string{"run", "--kernel", k, "--rootfs", in["dir"], "--", "true"}, 125, []string{"--rootfs", "has no /proc"}},
		{"--rootfs without a command", []string{"run", "--kernel", k, "--rootfs", in["dir"]}, 2, []string{"--rootfs is for command mode"}},
		{"--overlay missing", []string{"run", "--kernel", k, "--overlay", in["missing"], "--", "true"}, 125, []string{"--overlay " + in["missing"], "no such file"}},
		{"--overlay a file", []string{"run", "--kernel", k, "--overlay", in["payload.bin"], "--", "true"}, 125, []string{"--overlay", "not a directory"}},
		{"--overlay /", []string{"run", "--kernel", k, "--overlay", "/", "--", "true"}, 125, []string{"--overlay /", "root itself"}},
		{"--overlay twice", []string{"run", "--kernel", k, "--overlay", in["dir"], "--overlay", in["dir"] + "/", "--", "true"}, 125, []string{"given twice"}},
		{"--overlay without a command", []string{"run", "--kernel", k, "--overlay", in["dir"]}, 2, []string{"--overlay is for command mode"}},
		{"--serial bogus", []string{"run", "--kernel", k, "--serial", "16550"}, 2, []string{"--serial", "16550", "pl011"}},
		{"--profile=bogus", []string{"run", "--kernel", k, "--profile=lite"}, 2, []string{"--profile", `"lite"`, "--profile=light"}},
		{"--profile=false with --per-vcpu", []string{"run", "--kernel", k, "--profile=false", "--per-vcpu"}, 2, []string{"need --profile"}},
		{"--profile=light with --guest-symbols", []string{"run", "--kernel", k, "--profile=light", "--guest-symbols", in["payload.bin"]}, 2, []string{"--profile=light", "--guest-symbols"}},
		{"--profile=light with --profile-via", []string{"run", "--kernel", k, "--profile=light", "--profile-via", "perf"}, 2, []string{"--profile=light", "--profile-via"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			checkFailure(t, dir, mvm(t, dir, tt.args...), tt.code, tt.says...)
		})
	}
}

// Exit statuses follow error types, not error text: a KVM ioctl's EINVAL
// reads "invalid argument" like a flag error does, and is not one.
func TestExitStatusFollowsErrorType(t *testing.T) {
	for _, tt := range []struct {
		err  error
		code int
	}{
		{fmt.Errorf("KVM_CREATE_VM: %w", syscall.EINVAL), 1},
		{errors.New(`unknown command "x" (invalid argument)`), 1},
		{usageError{errors.New("--cpus 0: a VM needs at least 1 vCPU")}, 2},
		{fmt.Errorf("variant B: %w", usageError{errors.New("--psci bogus")}), 2},
		{&vmm.InputError{Err: errors.New("kernel /k does not exist")}, 2},
		{fmt.Errorf("variant B: %w", &vmm.InputError{Err: errors.New("kernel /k is empty")}), 2},
		{vmm.ErrNeedsARM64, 1},
		{&exitError{130, "stopped from the console (Ctrl-A x)"}, 130},
	} {
		if code, msg := exitStatus(tt.err); code != tt.code || msg != tt.err.Error() {
			t.Errorf("exitStatus(%q) = %d, %q; want %d, the error's text", tt.err, code, msg, tt.code)
		}
	}
}
