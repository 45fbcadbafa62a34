package runsummary

import (
	"os"
	"runtime"
	"strings"
)

// Host is the machine a run or a bench ran on: absolute times compare only
// on one host.
type Host struct {
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	Kernel   string `json:"kernel,omitempty"`
	CPUs     int    `json:"cpus"`
	Hostname string `json:"hostname,omitempty"`
}

// CurrentHost describes this machine (the kernel release from
// /proc/sys/kernel/osrelease where there is one).
func CurrentHost() Host {
	h := Host{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	h.Hostname, _ = os.Hostname()
	return h
}
