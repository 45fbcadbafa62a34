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
	env := withoutVars(os.Environ(), "GODEBUG", startEnv, godebugBeforeEnv)
	env = append(env, "GODEBUG="+godebug, startEnv+"="+strconv.FormatInt(start.UnixNano(), 10), godebugBeforeEnv+"="+saved)
	syscall.Exec(execPath(os.Executable()), os.Args, env)
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
	env := withoutVars(environ, "GODEBUG", godebugBeforeEnv)
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
