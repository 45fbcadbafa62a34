package main

import (
	"os"
	"strconv"
	"time"
)

// startEnv carries, across withRuntimeSettings' exec, when the first process
// started (Unix nanoseconds).
const startEnv = "MVM_START_UNIXNANO"

// startBeforeExec returns when mvm started: now, or the first process's
// start from startEnv when this process is withRuntimeSettings' exec, moved onto
// now's monotonic clock. It clears startEnv, so that nothing mvm starts
// inherits it. A value in the future or more than a minute old is not
// ours and is ignored.
func startBeforeExec(now time.Time) time.Time {
	v, ok := os.LookupEnv(startEnv)
	if !ok {
		return now
	}
	os.Unsetenv(startEnv)
	ns, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return now
	}
	ago := time.Duration(now.UnixNano() - ns)
	if ago < 0 || ago > time.Minute {
		return now
	}
	return now.Add(-ago)
}
