package attach

import "github.com/mvm-dev/mvm/internal/kvmproc"

// The errors Run wraps when it cannot profile anything, so that a caller
// can word them for a user without importing internal/kvmproc: the
// process is gone (or never was), holds no KVM VM, or mvm lacks ptrace
// access to it.
var (
	ErrGone   = kvmproc.ErrGone
	ErrNotKVM = kvmproc.ErrNotKVM
)

// AccessError is the error Run wraps when mvm lacks ptrace access.
type AccessError = kvmproc.AccessError

// ProcessName is process pid's name (/proc/PID/comm), for messages.
func ProcessName(pid int) (string, error) {
	p, err := kvmproc.Open(pid)
	if err != nil {
		return "", err
	}
	defer p.Close()
	return p.Name()
}
