//go:build linux && arm64

package integration

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHelloPayload(t *testing.T) {
	r := mvm(t, time.Minute, "run", "--kernel", payload(t, "hello.bin"))
	if r.code != 0 {
		t.Fatalf("exit status %d, want 0\nstderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "hello from the mvm bare-metal payload\n") {
		t.Errorf("console output lacks the payload's line:\n%q", r.stdout)
	}
}

func TestConsoleToFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console.log")
	r := mvm(t, time.Minute, "run", "--kernel", payload(t, "hello.bin"), "--console", "file:"+path)
	if r.code != 0 {
		t.Fatalf("exit status %d\nstderr:\n%s", r.code, r.stderr)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "hello from the mvm bare-metal payload\n" {
		t.Errorf("console file holds %q", got)
	}
	if strings.Contains(r.stdout, "hello") {
		t.Errorf("console output leaked to stdout: %q", r.stdout)
	}
}

func TestUnmappedAccessContinues(t *testing.T) {
	r := mvm(t, time.Minute, "run", "--kernel", payload(t, "unmapped.bin"), "--memory", "64M", "--log-level", "warn")
	if r.code != 0 {
		t.Fatalf("exit status %d, want 0 (SYSTEM_OFF after the unmapped access)\nstderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "unmapped read returned 0\n") {
		t.Errorf("the guest did not read zero from an unmapped address:\n%q", r.stdout)
	}
	// Logged once per address: 0xa000000 (read, then write) and 0xa000008.
	if n := strings.Count(r.stderr, "addr=0xa000000 "); n != 1 {
		t.Errorf("address 0xa000000 logged %d times, want once:\n%s", n, r.stderr)
	}
	if n := strings.Count(r.stderr, "addr=0xa000008 "); n != 1 {
		t.Errorf("address 0xa000008 logged %d times, want once:\n%s", n, r.stderr)
	}
	// RAM is [0x4000_0000, 0x4400_0000): the next byte is not RAM.
	if n := strings.Count(r.stderr, "addr=0x44000000 "); n != 1 {
		t.Errorf("the access just past the end of RAM was logged %d times, want once:\n%s", n, r.stderr)
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte("this is not a kernel\n"), 0o644)
	hello := payload(t, "hello.bin")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing file", []string{"run", "--kernel", filepath.Join(dir, "nope")}, 2, "does not exist"},
		{"directory", []string{"run", "--kernel", dir}, 2, "is a directory"},
		{"empty file", []string{"run", "--kernel", empty}, 2, "is empty"},
		{"text file", []string{"run", "--kernel", text}, 2, "is a text file; --kernel takes an arm64 Image"},
		{"no kernel", []string{"run"}, 2, "--kernel is required"},
		{"zero cpus", []string{"run", "--kernel", hello, "--cpus", "0"}, 2, "at least 1 vCPU"},
		{"tiny memory", []string{"run", "--kernel", hello, "--memory", "1K"}, 2, "too small"},
		{"unknown flag", []string{"run", "--kernel", hello, "--frobnicate"}, 2, "unknown flag"},
		{"bad console", []string{"run", "--kernel", hello, "--console", "tty"}, 2, "--console"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			oneLineError(t, mvm(t, 30*time.Second, c.args...), c.code, c.want)
		})
	}

	// --guest-symbols files that are not symbol files: one line before the
	// guest starts, and no profile file left behind.
	stub := filepath.Join(dir, "System.map-stub")
	os.WriteFile(stub, []byte("ffffffffffffffff B The real System.map is in the linux-image-6.12.0-1-arm64-dbg package\n"), 0o644)
	huge := filepath.Join(dir, "huge.map")
	// Long lines (2 KiB names), so the 64 MiB limit is reached in 32k of them.
	hugeLine := "ffff800080000000 T " + strings.Repeat("f", 2048-20) + "\n"
	os.WriteFile(huge, bytes.Repeat([]byte(hugeLine), 65<<20/len(hugeLine)+1), 0o644)
	stripped := filepath.Join(dir, "stripped.elf") // an ELF without a symbol table
	os.WriteFile(stripped, elfWithoutSymbols(t), 0o644)
	syms := []struct{ name, file, want string }{
		{"text", text, "not a symbol file: line 1"},
		{"Debian's stub System.map", stub, "-dbg package"},
		{"binary", hello, "NUL byte"},
		{"too big", huge, "not a symbol file: more than"},
		{"ELF without symbols", stripped, "no symbol section"},
		{"missing", filepath.Join(dir, "nope.map"), "does not exist"},
	}
	for _, c := range syms {
		t.Run("guest-symbols "+c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "profile.json")
			r := mvm(t, 30*time.Second, "run", "--kernel", hello, "--profile", "--profile-out", out, "--guest-symbols", c.file)
			oneLineError(t, r, 2, c.want)
			if !strings.Contains(r.stderr, "--guest-symbols") {
				t.Errorf("the error does not name the flag: %q", r.stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s was left behind", out)
			}
		})
	}
}

// elfWithoutSymbols is a minimal valid ELF64 (arm64) file with no
// sections at all, so no symbol table (as a stripped vmlinux).
func elfWithoutSymbols(t *testing.T) []byte {
	t.Helper()
	var h [64]byte
	copy(h[:], "\x7fELF")
	h[4], h[5], h[6] = 2, 1, 1                 // ELFCLASS64, little-endian, EV_CURRENT
	binary.LittleEndian.PutUint16(h[16:], 2)   // ET_EXEC
	binary.LittleEndian.PutUint16(h[18:], 183) // EM_AARCH64
	binary.LittleEndian.PutUint32(h[20:], 1)   // e_version
	binary.LittleEndian.PutUint16(h[52:], 64)  // e_ehsize
	binary.LittleEndian.PutUint16(h[58:], 64)  // e_shentsize
	return h[:]
}

// TestNoKVMAccess runs mvm as an unprivileged user, who cannot open the
// lab's /dev/kvm (mode 0600, owned by root).
func TestNoKVMAccess(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test switches to an unprivileged user and must start as root (the lab runs as root)")
	}
	k := publicCopy(t, payload(t, "hello.bin"))
	r := mvmCmd(t, 30*time.Second, asNobody, "run", "--kernel", k)
	oneLineError(t, r, 1, "/dev/kvm")

	// mvm bench checks the host once, after its input and before the
	// first boot: one line, exit status 3, no boot and no output.
	out := filepath.Join(filepath.Dir(k), "bench.json")
	r = mvmCmd(t, 30*time.Second, asNobody, "bench", "--kernel", k, "--runs", "4", "--cpus", "1,2", "--json", out)
	oneLineError(t, r, 3, "no boots run: ")
	if !strings.Contains(r.stderr, "/dev/kvm") || strings.Contains(r.stderr, "boots:") {
		t.Errorf("mvm bench as nobody: stderr %q, want only the /dev/kvm line", r.stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("mvm bench wrote %s", out)
	}
}

// TestConsoleFileNotCreatable: a --console file that cannot be created
// stops mvm before the guest starts (bad input: exit 2, one line). Before
// the fix the guest ran to its power-off with its console lost and mvm
// exited 0.
func TestConsoleFileNotCreatable(t *testing.T) {
	dir := t.TempDir()
	res := filepath.Join(dir, "result.json")
	r := mvm(t, time.Minute, "run", "--kernel", payload(t, "hello.bin"),
		"--console", "file:"+filepath.Join(dir, "missing-dir", "console.log"), "--result-json", res)
	oneLineError(t, r, 2, "--console file:")
	if _, err := os.Stat(res); err == nil {
		t.Error("the guest ran: --result-json was written")
	}
}
