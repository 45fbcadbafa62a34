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

	"github.com/mvm-dev/mvm/guest"
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
	for _, s := range []string{"--kernel", "--cpus", "--memory", "--initrd", "--console", "--psci", "--on-reset", "--pmu", "KVM_CAP_ARM_PMU_V3", "PL031", "Example"} {
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
		"vmlinuz-lzma":   guest.Zboot([]byte("\x5d\x00\x00\x80\x00lzma data"), "lzma", 4),
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
		{"missing kernel", []string{"run", "--kernel", in["missing"]}, 1, []string{in["missing"], "does not exist"}},
		{"kernel is a directory", []string{"run", "--kernel", in["dir"]}, 1, []string{"directory"}},
		{"empty kernel", []string{"run", "--kernel", in["empty"]}, 1, []string{"empty"}},
		{"ELF kernel", []string{"run", "--kernel", in["vmlinux"]}, 1, []string{"ELF"}},
		{"gzip'd non-kernel", []string{"run", "--kernel", in["notes.gz"]}, 1, []string{"gzip", "Image.gz", "EFI zboot", "build tree"}},
		{"truncated Image.gz", []string{"run", "--kernel", in["Image-cut.gz"]}, 1, []string{"truncated"}},
		{"zboot with lzma", []string{"run", "--kernel", in["vmlinuz-lzma"]}, 1, []string{"EFI zboot", `"lzma"`, "gzip and zstd"}},
		{"unbuilt kernel tree", []string{"run", "--kernel", in["tree"]}, 1, []string{"arch/arm64/boot/Image"}},
		{"missing initrd", []string{"run", "--kernel", k, "--initrd", in["missing"]}, 1, []string{"initrd", "does not exist"}},
		{"console none, missing kernel", []string{"run", "--kernel", in["missing"], "--console", "none"}, 1, []string{"does not exist"}},
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
		{&exitError{130, "stopped from the console (Ctrl-A x)"}, 130},
	} {
		if code, msg := exitStatus(tt.err); code != tt.code || msg != tt.err.Error() {
			t.Errorf("exitStatus(%q) = %d, %q; want %d, the error's text", tt.err, code, msg, tt.code)
		}
	}
	// The same through the binary: a kernel path that says "invalid
	// argument" is a missing file (1), not a bad command line (2).
	dir := t.TempDir()
	missing := filepath.Join(t.TempDir(), "invalid argument")
	checkFailure(t, dir, mvm(t, dir, "run", "--kernel", missing), 1, "does not exist")
}
