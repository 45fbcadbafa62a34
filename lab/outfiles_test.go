package main

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// console renders files the way the lab's /init sends them: gzip, then
// base64 in 76-column lines as busybox base64 writes them.
func console(t *testing.T, name string, data []byte) []string {
	t.Helper()
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(data)
	zw.Close()
	enc := base64.StdEncoding.EncodeToString(z.Bytes())
	lines := []string{fileBegin + name}
	for len(enc) > 76 {
		lines = append(lines, enc[:76])
		enc = enc[76:]
	}
	return append(lines, enc, fileEnd)
}

func TestOutFilesRoundTrip(t *testing.T) {
	dir := t.TempDir()
	o := &outFiles{dir: dir}
	a := bytes.Repeat([]byte(`{"cpus": 128, "x": "y"}`+"\n"), 5000)
	b := []byte("small")
	var shown []string
	lines := append([]string{"lab: booted"}, console(t, "run.json", a)...)
	// A kernel message in the middle of a block is shown, not decoded.
	lines = append(lines[:5], append([]string{"[   12.3] rcu: INFO: something"}, lines[5:]...)...)
	lines = append(lines, console(t, "b.txt", b)...)
	lines = append(lines, "MVM-LAB-EXIT: 0")
	for _, l := range lines {
		if !o.line(l) {
			shown = append(shown, l)
		}
	}
	if err := o.err(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(shown, "|") != "lab: booted|[   12.3] rcu: INFO: something|MVM-LAB-EXIT: 0" {
		t.Errorf("shown lines: %q", shown)
	}
	for name, want := range map[string][]byte{"run.json": a, "b.txt": b} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes back, want %d (%v)", name, len(got), len(want), err)
		}
	}
}

func TestOutFilesDamage(t *testing.T) {
	for _, c := range []struct {
		name  string
		lines func([]string) []string
		want  string
	}{
		{"cut off", func(l []string) []string { return l[:len(l)-1] }, "ended inside"},
		{"line lost", func(l []string) []string { return append(l[:2], l[3:]...) }, "lab output"},
		{"bad name", func(l []string) []string { l[0] = fileBegin + "../x"; return l }, "plain file name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			o := &outFiles{dir: dir}
			for _, l := range c.lines(console(t, "f.json", bytes.Repeat([]byte("0123456789"), 2000))) {
				o.line(l)
			}
			if err := o.err(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want %q", err, c.want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("damaged file written: %v", ents)
			}
		})
	}
}

func TestLabKernelFailed(t *testing.T) {
	for _, c := range []struct {
		line string
		want bool
	}{
		{"[   36.232538] watchdog: Watchdog detected hard LOCKUP on cpu 1", true},
		{"[  120.000001] Internal error: Oops: 0000000096000004 [#1] SMP", true},
		// A nested guest's console quoted in a test's log.
		{"        [   36.232538] watchdog: Watchdog detected hard LOCKUP on cpu 7", false},
		{"    bench_test.go:162: Internal error: Oops in the guest", false},
		{"[    1.000000] Run /init as init process", false},
	} {
		if got := labKernelFailed(c.line); got != c.want {
			t.Errorf("labKernelFailed(%q) = %v, want %v", c.line, got, c.want)
		}
	}
}
