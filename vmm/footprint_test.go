//go:build linux

package vmm

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestExecSpans(t *testing.T) {
	smaps := `00400000-00500000 r-xp 00000000 08:01 12 /usr/bin/mvm
Size:               1024 kB
Rss:                 800 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
00500000-00600000 r--p 00100000 08:01 12 /usr/bin/mvm
Anonymous:             0 kB
00600000-00610000 rw-p 00200000 08:01 12 /usr/bin/mvm
Anonymous:            12 kB
00700000-00710000 r-xp 00000000 08:01 13 /usr/bin/mvm.old
Anonymous:             0 kB
00800000-00810000 r-xp 00300000 08:01 12 /usr/bin/mvm
Anonymous:             4 kB
7f0000000000-7f0000100000 r--p 00000000 00:00 0
Anonymous:             0 kB
`
	got, err := execSpans([]byte(smaps), "/usr/bin/mvm")
	if err != nil {
		t.Fatal(err)
	}
	// Text and read-only data; not the data segment (writable), another
	// file, a text page a breakpoint copied, or an anonymous mapping.
	want := []span{{0x400000, 0x500000}, {0x500000, 0x600000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("spans %x, want %x", got, want)
	}
	if _, err := execSpans([]byte("zzz-00500000 r-xp 0 08:01 12 /usr/bin/mvm\n"), "/usr/bin/mvm"); err == nil {
		t.Error("a bad range was accepted")
	}
}

// exeRSS is the resident size of this test binary's read-only mappings.
func exeRSS(t *testing.T) uint64 {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var total uint64
	in := false
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") {
			in = len(f) >= 6 && f[5] == exe && !strings.Contains(f[1], "w")
			continue
		}
		if in && f[0] == "Rss:" {
			n, _ := strconv.ParseUint(f[1], 10, 64)
			total += n << 10
		}
	}
	return total
}

// TestUnmapSetupText runs on this test binary itself: its text's RSS
// drops, and the code keeps running (the pages come back when touched).
func TestUnmapSetupText(t *testing.T) {
	before := exeRSS(t)
	spans, err := setupText()
	if err != nil {
		t.Fatal(err)
	}
	if err := dropText(spans); err != nil {
		t.Fatal(err)
	}
	after := exeRSS(t)
	t.Logf("read-only executable pages resident: %d KiB -> %d KiB", before>>10, after>>10)
	if before == 0 || after >= before {
		t.Errorf("resident %d -> %d bytes: want a drop", before, after)
	}
	// Code the test has not run since, and data it reads: still there.
	if s := strconv.Quote("still \"here\""); s != `"still \"here\""` {
		t.Errorf("after the unmap: %s", s)
	}
}
