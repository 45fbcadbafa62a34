//go:build linux

package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// noHeapTHP makes the Go heap use small pages: it re-executes mvm, once,
// with GODEBUG=disablethp=1 added, and returns only when it does not (the
// setting is there already, or the exec failed; mvm then runs as it is).
//
// Why: with transparent huge pages set to "always" (Debian's default), a
// fault anywhere in a 2 MiB stretch of the heap arena maps a whole huge
// page, and khugepaged (max_ptes_none 511) fills in the rest, so mvm's
// ~1.5 MiB of heap held 6 MiB resident (docs/footprint.md). The runtime's
// disablethp setting (https://go.dev/issue/64332) marks the heap
// MADV_NOHUGEPAGE; it is read once at start and cannot be set by
// //go:debug, hence the exec. Guest RAM is mvm's own mapping and keeps
// huge pages. An explicit disablethp in GODEBUG is left as it is. The
// exec costs a few milliseconds (a second runtime start and package init),
// so start, when this process began, goes along (startEnv) and the boot
// phases still count from it.
func noHeapTHP(start time.Time) {
	godebug := os.Getenv("GODEBUG")
	if strings.Contains(","+godebug, ",disablethp=") {
		return
	}
	if godebug != "" {
		godebug += ","
	}
	env := os.Environ()
	for i := 0; i < len(env); i++ {
		if strings.HasPrefix(env[i], "GODEBUG=") || strings.HasPrefix(env[i], startEnv+"=") {
			env = append(env[:i], env[i+1:]...)
			i--
		}
	}
	env = append(env, "GODEBUG="+godebug+"disablethp=1", startEnv+"="+strconv.FormatInt(start.UnixNano(), 10))
	// /proc/self/exe is this very binary even if its path has changed.
	syscall.Exec("/proc/self/exe", os.Args, env)
}
