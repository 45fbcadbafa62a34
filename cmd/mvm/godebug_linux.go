//go:build linux

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// runtimeSettings are the Go runtime settings mvm runs with, for its
// footprint (docs/footprint.md). The runtime reads GODEBUG once at start,
// and neither can be set by //go:debug, hence the exec in
// withRuntimeSettings.
//
//   - disablethp=1: the Go heap on small pages. With transparent huge
//     pages set to "always" (Debian's default), a fault anywhere in a
//     2 MiB stretch of the heap arena maps a whole huge page, and
//     khugepaged (max_ptes_none 511) fills in the rest, so mvm's ~1.5 MiB
//     of heap held 6 MiB resident. The setting (https://go.dev/issue/64332)
//     marks the heap MADV_NOHUGEPAGE. Guest RAM is mvm's own mapping and
//     keeps huge pages.
//   - asyncpreemptoff=1: no signal-based goroutine preemption. Each
//     preemption signal makes the runtime look up the interrupted PC in
//     the function tables (pclntab) to see whether it may stop there; on
//     a busy host sysmon sends them to goroutines whose threads wait for
//     a CPU, so a running VM kept touching the tables at random places
//     and ~1.3 MiB of them stayed resident, with the kernel's fault-around.
//     mvm's goroutines block in system calls (KVM_RUN, reads, futexes),
//     where they are preempted anyway, and its loops call functions, where
//     cooperative preemption stops them; no loop of mvm's runs long without
//     either.
func runtimeSettings() []string { return []string{"disablethp=1", "asyncpreemptoff=1"} }

// withRuntimeSettings re-executes mvm, once, with the runtimeSettings
// missing from GODEBUG added, and returns only when it does not (they are
// all there already, or the exec failed; mvm then runs as it is). A setting
// given in GODEBUG explicitly is left as it is. The exec costs a few
// milliseconds (a second runtime start and package init), so start, when
// this process began, goes along (startEnv) and the boot phases still
// count from it. The GODEBUG the user gave (or its absence) goes along in
// godebugBeforeEnv, so that commands mvm starts (mvm profile's) get it
// back instead of mvm's settings (childEnviron).
func withRuntimeSettings(start time.Time) {
	if _, ok := os.LookupEnv(startEnv); ok {
		nameAfterExec()
		if _, ok := os.LookupEnv(thpRestoreEnv); ok {
			bssOnSmallPages()
		}
	}
	before, had := os.LookupEnv("GODEBUG")
	godebug, changed := withSettings(before)
	if !changed {
		return
	}
	saved := "unset"
	if had {
		saved = "set:" + before
	}
	env := withoutVars(os.Environ(), "GODEBUG", startEnv, godebugBeforeEnv, thpRestoreEnv)
	env = append(env, "GODEBUG="+godebug, startEnv+"="+strconv.FormatInt(start.UnixNano(), 10), godebugBeforeEnv+"="+saved)
	// Transparent huge pages off for the exec'd runtime's start, back on
	// after it (bssOnSmallPages), where THP was on.
	if thp, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prGetTHPDisable, 0, 0); errno == 0 && thp == 0 {
		if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetTHPDisable, 1, 0); errno == 0 {
			env = append(env, thpRestoreEnv+"=1")
		}
	}
	syscall.Exec(execPath(os.Executable()), os.Args, env)
	// The exec failed: mvm runs as it is, with THP as it was.
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTHPDisable, 0, 0)
}

// prctl(2) options (include/uapi/linux/prctl.h).
const (
	prSetTHPDisable = 41
	prGetTHPDisable = 42
)

// thpRestoreEnv tells the exec'd mvm that withRuntimeSettings turned
// transparent huge pages off for it (PR_SET_THP_DISABLE, which an exec
// keeps) and that it should turn them back on (bssOnSmallPages).
const thpRestoreEnv = "MVM_THP_RESTORE"

// bssOnSmallPages turns transparent huge pages back on for mvm, now that
// the runtime has started on small pages, and keeps them off the binary's
// zero-initialised data (.bss). That mapping is anonymous and, with THP
// "always" (Debian's default), the runtime's first write into any 2 MiB
// stretch of it that lies whole inside the mapping faults in a whole huge
// page: Go 1.26 links a 32 MiB zero buffer (crypto/internal/fips140/drbg)
// into it, and whenever the binary's layout put the runtime's own .bss
// variables inside such a stretch, 2 MiB of it was resident (TestFootprint:
// anonymous memory beyond guest RAM 4.29 MiB instead of ~2.4). Guest RAM,
// mapped later, keeps its huge pages. Best effort: on failure mvm runs as
// it is.
func bssOnSmallPages() {
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTHPDisable, 0, 0)
	start, end, ok := bssRange()
	if !ok {
		return
	}
	// MADV_NOHUGEPAGE: khugepaged (max_ptes_none 511) would otherwise
	// collapse the small pages into a huge one later.
	syscall.RawSyscall(syscall.SYS_MADVISE, start, end-start, syscall.MADV_NOHUGEPAGE)
}

// bssRange finds the binary's .bss: the anonymous read-write mapping that
// starts where the executable's last mapping ends (/proc/self/maps).
func bssRange() (start, end uintptr, ok bool) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, 0, false
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, 0, false
	}
	return bssIn(string(maps), exe)
}

// bssIn is bssRange on the text of a maps file.
func bssIn(maps, exe string) (start, end uintptr, ok bool) {
	var exeEnd string
	for _, line := range strings.Split(maps, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		switch {
		case len(f) >= 6 && f[5] == exe:
			exeEnd = hi
		case exeEnd != "" && len(f) == 5 && lo == exeEnd && strings.HasPrefix(f[1], "rw"):
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			return uintptr(a), uintptr(b), err1 == nil && err2 == nil && b > a
		default:
			if exeEnd != "" {
				return 0, 0, false
			}
		}
	}
	return 0, 0, false
}

// execPath is the file withRuntimeSettings executes: the binary's own path
// exe when it still names the running file (the same device and inode as
// /proc/self/exe), else /proc/self/exe, which is this very binary even if
// its path has changed or it was deleted. Exec names the process after the
// base name of the path it was given, so with exe's path the process is
// "mvm" from its first instruction; after an exec of /proc/self/exe it is
// "exe" until nameAfterExec runs, after the runtime start and every
// package's init (a reader of /proc/PID/comm in between saw "exe").
func execPath(exe string, err error) string {
	const self = "/proc/self/exe"
	if err != nil {
		return self
	}
	var a, b syscall.Stat_t
	if syscall.Stat(exe, &a) != nil || syscall.Stat(self, &b) != nil || a.Dev != b.Dev || a.Ino != b.Ino {
		return self
	}
	return exe
}

// nameAfterExec gives the process its name back after withRuntimeSettings'
// exec: exec names a process after the file it runs, which is
// /proc/self/exe when the binary's path no longer names it (execPath), so
// ps and top showed "exe" (and mvm profile --pid, which tells VMMs
// apart by name, would have too). The name is the binary's (at most 15
// bytes, the kernel's limit), as without the exec. It goes to every
// thread the runtime has started so far, which a new thread takes its
// name from; the main thread's is the process's (main's init keeps the
// main goroutine there, so no goroutine that renames its thread, as a
// vCPU's does, can rename the process).
func nameAfterExec() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	name := filepath.Base(exe)
	if len(name) > 15 {
		name = name[:15]
	}
	tasks, _ := filepath.Glob("/proc/self/task/*/comm")
	for _, f := range tasks {
		// A name is a convenience: a thread that is gone or refuses
		// keeps "exe".
		_ = os.WriteFile(f, []byte(name), 0)
	}
}

// godebugBeforeEnv carries, across withRuntimeSettings' exec, the GODEBUG
// mvm was started with: "set:VALUE", or "unset".
const godebugBeforeEnv = "MVM_GODEBUG_BEFORE"

// childEnviron is the environment for a command mvm starts: mvm's own,
// with GODEBUG as the user gave it (mvm's runtime settings are for mvm;
// asyncpreemptoff in another Go program would change how it runs). nil
// means mvm's environment as it is (no exec added settings).
func childEnviron() []string { return childEnvironFrom(os.Environ()) }

func childEnvironFrom(environ []string) []string {
	saved, ok := "", false
	for _, kv := range environ {
		if v, found := strings.CutPrefix(kv, godebugBeforeEnv+"="); found {
			saved, ok = v, true
		}
	}
	if !ok {
		return nil
	}
	env := withoutVars(environ, "GODEBUG", godebugBeforeEnv, thpRestoreEnv)
	if v, set := strings.CutPrefix(saved, "set:"); set {
		env = append(env, "GODEBUG="+v)
	}
	return env
}

// withoutVars returns environ without the variables named.
func withoutVars(environ []string, names ...string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, name) {
			out = append(out, kv)
		}
	}
	return out
}

// withSettings returns godebug with the runtimeSettings whose keys it does
// not name added, and whether it added any.
func withSettings(godebug string) (string, bool) {
	var add []string
	for _, s := range runtimeSettings() {
		key, _, _ := strings.Cut(s, "=")
		if !strings.Contains(","+godebug, ","+key+"=") {
			add = append(add, s)
		}
	}
	if len(add) == 0 {
		return godebug, false
	}
	if godebug != "" {
		godebug += ","
	}
	return godebug + strings.Join(add, ","), true
}
