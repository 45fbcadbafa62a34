//go:build linux

package vmm

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// span is one address range of mvm's own mappings.
type span struct{ start, end uint64 }

// execSpans picks out of /proc/self/smaps (proc(5)) the mappings of the
// executable exe that cannot hold data of mvm's own: not writable, and
// no anonymous (copy-on-write) page, as a debugger's breakpoint would
// make. Their pages are the file's, in the page cache.
func execSpans(smaps []byte, exe string) ([]span, error) {
	var out []span
	var cur *span
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") {
			cur = nil
			if len(f) < 6 || strings.Join(f[5:], " ") != exe || strings.Contains(f[1], "w") {
				continue
			}
			lo, hi, ok := strings.Cut(f[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if !ok || err1 != nil || err2 != nil || end <= start {
				return nil, fmt.Errorf("smaps: bad range %q", f[0])
			}
			out = append(out, span{start, end})
			cur = &out[len(out)-1]
			continue
		}
		if cur != nil && f[0] == "Anonymous:" && len(f) >= 2 && f[1] != "0" {
			out = out[:len(out)-1]
			cur = nil
		}
	}
	return out, sc.Err()
}

// setupText finds mvm's mappings of its executable's read-only pages
// (text, read-only data, the pclntab) for dropText. It reads
// /proc/self/smaps, so it runs before the sandbox, which refuses opening
// /proc files; dropText runs after it, so the sandbox's own assembly is
// setup too.
func setupText() ([]span, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return nil, err
	}
	return execSpans(smaps, exe)
}

// dropText drops the mappings setupText found once setup is done:
// MADV_DONTNEED on a read-only file mapping only clears the page-table
// entries; the pages stay in the page cache, shared with every other mvm,
// and the ones the running VM uses come back at the next touch (a minor
// fault, with the kernel's fault-around). What cobra, flag parsing, the
// loaders, the device-tree builder and the seccomp assembler touched then
// no longer counts in mvm's RSS (docs/footprint.md). It saves page
// tables, not page cache.
func dropText(spans []span) error {
	for _, s := range spans {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(s.start), uintptr(s.end-s.start), unix.MADV_DONTNEED); errno != 0 {
			return fmt.Errorf("madvise %#x-%#x: %w", s.start, s.end, errno)
		}
	}
	return nil
}
