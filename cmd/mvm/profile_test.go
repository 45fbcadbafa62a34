package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestProfileCLI: the command's exit status comes back, bad command lines
// and PIDs get one line, and --live prints a table per interval (the output
// file is not a terminal: no redraw codes).
func TestProfileCLI(t *testing.T) {
	dir := t.TempDir()
	if r := mvm(t, dir, "profile", "--", "sh", "-c", "exit 5"); r.code != 5 {
		t.Errorf("-- sh -c 'exit 5': status %d, stderr %q", r.code, r.stderr)
	}
	if r := mvm(t, dir, "profile", "--", "sh", "-c", "kill -TERM $$"); r.code != 128+15 {
		t.Errorf("command killed by SIGTERM: status %d, stderr %q", r.code, r.stderr)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "nothing to profile"},
		{[]string{"--pid", "1", "--", "true"}, 2, "not both"},
		{[]string{"true"}, 2, "after --"},
		{[]string{"--pid", "-3"}, 2, "positive"},
		{[]string{"--pid", "1", "--interval", "0s"}, 2, "--interval"},
		{[]string{"--pid", "1", "--format", "xml"}, 2, "--format"},
		{[]string{"--pid", "1", "--sources", "userspace"}, 2, "--sources"},
		{[]string{"--pid", "1", "--tracepoint-via", "ebpf"}, 2, "--tracepoint-via"},
		{[]string{"--pid", "2147483646"}, 1, "no such process"},
		{[]string{"--pid", strconv.Itoa(os.Getpid())}, 1, "is not a KVM process"},
		{[]string{"--", "/nonexistent/vmm"}, 127, "command not found"},
		{[]string{"--pid", "1", "--metrics-addr", "notanaddr"}, 2, "--metrics-addr \"notanaddr\""},
		{[]string{"--pid", "1", "--log-level", "loud"}, 2, "--log-level"},
		{[]string{"--pid", "1", "--out", filepath.Join("nodir", "p.txt")}, 2, "--out " + filepath.Join("nodir", "p.txt") + ": directory nodir does not exist"},
		{[]string{"--pid", "1", "--out", "."}, 2, "--out .: is a directory"},
		// A profile that never starts leaves no --out file.
		{[]string{"--pid", "2147483646", "--out", "p.txt"}, 1, "no such process"},
		{[]string{"--out", "p.txt", "--", "/nonexistent/vmm"}, 127, "command not found"},
	} {
		r := mvm(t, dir, append([]string{"profile"}, c.args...)...)
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		if r.code != c.code || len(lines) != 1 || !strings.HasPrefix(lines[0], "mvm: ") || !strings.Contains(r.stderr, c.want) {
			t.Errorf("mvm profile %v: status %d, stderr %q; want %d and one line with %q", c.args, r.code, r.stderr, c.code, c.want)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Fatalf("mvm profile %v left %v in its working directory", c.args, ents)
		}
	}

	out := filepath.Join(dir, "live.txt")
	if r := mvm(t, dir, "profile", "--live", "--interval", "100ms", "--out", out, "--", "sleep", "0.55"); r.code != 0 {
		t.Fatalf("--live: status %d, stderr %q", r.code, r.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// About five live tables and the final one; allow for a slow machine.
	if n := strings.Count(string(b), "Exit profile"); n < 3 {
		t.Errorf("--live over 550 ms at 100 ms printed %d tables:\n%s", n, b)
	}
	if strings.Contains(string(b), "\x1b[") {
		t.Error("--live into a file drew terminal escapes")
	}
}
