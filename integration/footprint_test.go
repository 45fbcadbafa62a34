//go:build linux && arm64

package integration

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mapping is one entry of /proc/PID/smaps.
type mapping struct {
	header          string // the address line: range, perms, offset, dev, inode, path
	perms, path     string
	size, rss, anon uint64 // bytes
	flags           []string
}

// readSmaps parses /proc/PID/smaps (proc(5)): a header line per mapping,
// then "Field: N kB" lines and a VmFlags line.
func readSmaps(pid int) ([]mapping, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") {
			m := mapping{header: line}
			if len(fields) >= 2 {
				m.perms = fields[1]
			}
			if len(fields) >= 6 {
				m.path = strings.Join(fields[5:], " ")
			}
			out = append(out, m)
			continue
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("smaps: field before the first mapping: %q", line)
		}
		m := &out[len(out)-1]
		if fields[0] == "VmFlags:" {
			m.flags = fields[1:]
			continue
		}
		if len(fields) != 3 || fields[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("smaps: %q: %w", line, err)
		}
		switch fields[0] {
		case "Size:":
			m.size = kb << 10
		case "Rss:":
			m.rss = kb << 10
		case "Anonymous:":
			m.anon = kb << 10
		}
	}
	return out, sc.Err()
}

// footprint is what a running mvm holds resident, from its smaps.
type footprint struct {
	rss   uint64 // whole process (the mappings' Rss added up)
	guest uint64 // resident pages of the guest RAM mapping
	// From /proc/PID/smaps_rollup (the kernel's own sums over all
	// mappings): Rss and Anonymous; and the guest RAM mapping's
	// Anonymous pages from smaps. anonBeyondGuest is their difference:
	// mvm's private memory that is not the guest's RAM, the per-VM cost.
	rollupRSS, rollupAnon, guestAnon uint64
	// Of the rest: anonymous memory outside guest RAM (Go heap, stacks,
	// runtime metadata, the binary's written data pages), and pages of
	// the mvm executable's file (text, read-only data, clean data), and
	// anything else file-backed or shared (vDSO, KVM's vCPU run pages).
	anon, binFile, otherFile uint64
	// top are the largest non-guest mappings, for the log.
	top []mapping
	// sections: the binary's resident pages by ELF section.
	sections map[string]uint64
	// godebug: mvm's GODEBUG (cmd/mvm re-executes itself with the
	// runtime settings its footprint needs, godebug_linux.go).
	godebug string
}

func (f footprint) overhead() uint64 { return f.rss - f.guest }

// anonBeyondGuest is the anonymous memory outside guest RAM, from
// smaps_rollup: what each VM costs the host on its own (the binary's file
// pages are the page cache's, shared by every mvm process).
func (f footprint) anonBeyondGuest() uint64 { return f.rollupAnon - f.guestAnon }

func (f footprint) String() string {
	mib := func(b uint64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }
	return fmt.Sprintf("anonymous beyond guest RAM %s (smaps_rollup Anonymous %s - guest RAM %s; RSS %s, binary file pages %s); overhead %s = anonymous %s + mvm binary file %s + other %s (RSS %s, guest RAM resident %s; binary resident: .text %s, .rodata %s, .gopclntab %s)",
		mib(f.anonBeyondGuest()), mib(f.rollupAnon), mib(f.guestAnon), mib(f.rollupRSS), mib(f.binFile),
		mib(f.overhead()), mib(f.anon), mib(f.binFile), mib(f.otherFile), mib(f.rss), mib(f.guest),
		mib(f.sections[".text"]), mib(f.sections[".rodata"]), mib(f.sections[".gopclntab"]))
}

// measureFootprint reads pid's smaps. The guest RAM mapping is the one
// anonymous mapping of guestSize bytes made with MAP_NORESERVE (VmFlags
// "nr", vmm/memory.go); the Go runtime maps without it. With --share it is
// the shared memfd mvm-guest-ram instead, whose pages are not Anonymous.
// guestMemfd is how smaps names guest RAM when it is a memfd (memfd_create
// names it "memfd:NAME", and it is unlinked from the start).
const guestMemfd = "/memfd:mvm-guest-ram"

func measureFootprint(pid int, bin string, guestSize uint64) (footprint, error) {
	maps, err := readSmaps(pid)
	if err != nil {
		return footprint{}, err
	}
	var f footprint
	guests := 0
	var rest []mapping
	for _, m := range maps {
		f.rss += m.rss
		if m.size == guestSize && (m.path == "" || strings.HasPrefix(m.path, guestMemfd)) && slices.Contains(m.flags, "nr") {
			f.guest += m.rss
			f.guestAnon += m.anon
			guests++
			continue
		}
		f.anon += m.anon
		file := m.rss - m.anon
		if m.path == bin {
			f.binFile += file
		} else {
			f.otherFile += file
		}
		if m.rss > 0 {
			rest = append(rest, m)
		}
	}
	if guests != 1 {
		return f, fmt.Errorf("%d mappings look like the %d-byte guest RAM", guests, guestSize)
	}
	if f.rollupRSS, f.rollupAnon, err = readRollup(pid); err != nil {
		return f, err
	}
	if f.rollupAnon < f.guestAnon {
		return f, fmt.Errorf("smaps_rollup Anonymous %d B below the guest RAM mapping's %d B", f.rollupAnon, f.guestAnon)
	}
	slices.SortFunc(rest, func(a, b mapping) int { return int(b.rss>>10) - int(a.rss>>10) })
	f.top = rest[:min(len(rest), 8)]
	if f.sections, err = binarySections(pid, bin, maps); err != nil {
		return f, err
	}
	return f, nil
}

// readRollup reads Rss and Anonymous from /proc/PID/smaps_rollup
// (proc(5): the smaps fields summed over all mappings by the kernel).
func readRollup(pid int) (rss, anon uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, 0, err
	}
	var haveRSS, haveAnon bool
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("smaps_rollup: %q: %w", line, err)
		}
		switch f[0] {
		case "Rss:":
			rss, haveRSS = kb<<10, true
		case "Anonymous:":
			anon, haveAnon = kb<<10, true
		}
	}
	if !haveRSS || !haveAnon {
		return 0, 0, fmt.Errorf("smaps_rollup of %d has no Rss or Anonymous line", pid)
	}
	return rss, anon, nil
}

// binarySections counts the resident pages of pid's mappings of its
// executable bin by the ELF section they hold (.text, .rodata,
// .gopclntab, ...), from /proc/PID/pagemap (pagemap.rst: bit 63, page
// present) and the file offsets of bin's PT_LOAD segments: which part of
// the binary a running mvm keeps mapped.
func binarySections(pid int, bin string, maps []mapping) (map[string]uint64, error) {
	ef, err := elf.Open(bin)
	if err != nil {
		return nil, err
	}
	defer ef.Close()
	pm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, err
	}
	defer pm.Close()
	section := func(foff uint64) string {
		for _, p := range ef.Progs {
			if p.Type != elf.PT_LOAD || foff < p.Off || foff >= p.Off+p.Filesz {
				continue
			}
			va := p.Vaddr + foff - p.Off
			for _, sec := range ef.Sections {
				if sec.Addr != 0 && va >= sec.Addr && va < sec.Addr+sec.Size {
					return sec.Name
				}
			}
		}
		return "other"
	}
	out := map[string]uint64{}
	page := uint64(os.Getpagesize())
	for _, m := range maps {
		f := strings.Fields(m.header)
		if m.path != bin || len(f) < 3 {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(f[2], 16, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("smaps %q: %w", m.header, err)
		}
		entries := make([]byte, (end-start)/page*8)
		if _, err := pm.ReadAt(entries, int64(start/page*8)); err != nil {
			return nil, fmt.Errorf("pagemap: %w", err)
		}
		for i := uint64(0); i < uint64(len(entries))/8; i++ {
			if binary.LittleEndian.Uint64(entries[8*i:])&(1<<63) != 0 {
				out[section(off+i*page)] += page
			}
		}
	}
	return out, nil
}

// footprintInitrd is the test init with a command that says it is up and
// then waits to be stopped.
func footprintInitrd(tb testing.TB) string {
	tb.Helper()
	return initrdWithCmd(tb, "echo mvm-footprint: ready\nsleep 600")
}

// footprintBoot boots Linux on 1 vCPU with 128 MiB, waits for the guest's
// userspace plus settle, measures mvm's footprint, and stops mvm.
func footprintBoot(tb testing.TB, initrd string, settle time.Duration, extra ...string) footprint {
	tb.Helper()
	bin := env(tb, "MVM_BIN")
	args := append([]string{"run", "--kernel", env(tb, "MVM_LINUX"), "--initrd", initrd, "--cpus", "1", "--memory", "128M",
		"--append", "quiet"}, extra...)
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	kill := time.AfterFunc(4*time.Minute, func() { cmd.Process.Kill() })
	defer kill.Stop()
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	ready := false
	for sc.Scan() {
		fmt.Fprintln(&out, sc.Text())
		if strings.Contains(sc.Text(), "mvm-footprint: ready") {
			ready = true
			break
		}
	}
	if !ready {
		cmd.Wait()
		tb.Fatalf("the guest never said it was ready\nconsole:\n%s\nstderr:\n%s", out.String(), errb.String())
	}
	time.Sleep(settle)
	abs, err := filepath.Abs(bin)
	if err != nil {
		tb.Fatal(err)
	}
	f, err := measureFootprint(cmd.Process.Pid, abs, 128<<20)
	if env, rerr := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid)); rerr == nil {
		for _, kv := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
				f.godebug = v
			}
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	go func() {
		for sc.Scan() {
		}
	}()
	cmd.Wait()
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// anonBudget is the goal for mvm's anonymous memory beyond guest RAM
// (smaps_rollup) after a 1-vCPU 128 MiB Linux boot: 3 MiB (issue 22, item
// 7). That is what each VM costs the host on its own; the binary's file
// pages are page cache shared by every mvm. Measured 2.44-2.49 MiB (four
// boots) with client_golang linked, 1.88 and 2.06 MiB before
// (docs/footprint.md):
// the heap back on huge pages (+4 MiB) crosses it.
const anonBudget = 3 << 20

// footprintBudget bounds RSS beyond resident guest RAM (anonymous and
// file pages) after the same boot: 6 MiB. Measured 4.82-4.88 MiB with
// client_golang linked (4.01, 4.18 before), so it leaves 1.1 MiB and
// still catches the large cuts undone: the heap back on huge pages (+4
// MiB), setup's text kept mapped (+3.5 MiB of file pages).
const footprintBudget = 6 << 20

// TestFootprint boots Linux on 1 vCPU with 128 MiB, and once the guest's
// userspace runs, reads mvm's /proc/PID/smaps and smaps_rollup from
// outside: anonymous memory beyond guest RAM must stay within anonBudget,
// RSS minus the guest RAM mapping's resident pages within footprintBudget.
func TestFootprint(t *testing.T) {
	f := footprintBoot(t, footprintInitrd(t), time.Second)
	t.Log(f)
	names := slices.Sorted(maps.Keys(f.sections))
	for _, n := range names {
		t.Logf("  binary %-12s %5d KiB resident", n, f.sections[n]>>10)
	}
	for _, m := range f.top {
		t.Logf("  %6d KiB rss %6d KiB anon  %s", m.rss>>10, m.anon>>10, m.header)
	}
	for _, want := range []string{"disablethp=1", "asyncpreemptoff=1"} {
		if !slices.Contains(strings.Split(f.godebug, ","), want) {
			t.Errorf("mvm runs with GODEBUG=%q, without %s (docs/footprint.md)", f.godebug, want)
		}
	}
	if f.anonBeyondGuest() > anonBudget {
		t.Errorf("mvm anonymous memory beyond guest RAM %.2f MiB, budget %.2f MiB", float64(f.anonBeyondGuest())/(1<<20), float64(anonBudget)/(1<<20))
	}
	if f.overhead() > footprintBudget {
		t.Errorf("mvm overhead %.2f MiB, budget %.2f MiB", float64(f.overhead())/(1<<20), float64(footprintBudget)/(1<<20))
	}
}

// BenchmarkFootprint: TestFootprint's measurement repeated, median and
// range of the overhead and its parts.
func BenchmarkFootprint(b *testing.B) {
	initrd := footprintInitrd(b)
	var beyond, rss, over, anon, file []float64
	for i := 0; i < b.N; i++ {
		f := footprintBoot(b, initrd, time.Second)
		b.Log(f)
		beyond, rss = append(beyond, float64(f.anonBeyondGuest())), append(rss, float64(f.rollupRSS))
		over, anon, file = append(over, float64(f.overhead())), append(anon, float64(f.anon)), append(file, float64(f.binFile))
	}
	for _, s := range []struct {
		name string
		v    []float64
	}{{"anonbeyondguest", beyond}, {"rss", rss}, {"overhead", over}, {"anon", anon}, {"binfile", file}} {
		b.ReportMetric(median(s.v)/(1<<20), s.name+"-MiB")
		b.ReportMetric(slices.Min(s.v)/(1<<20), s.name+"-min-MiB")
		b.ReportMetric(slices.Max(s.v)/(1<<20), s.name+"-max-MiB")
	}
	b.ReportMetric(0, "ns/op")
}
