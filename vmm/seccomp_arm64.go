//go:build linux && arm64

package vmm

import (
	"fmt"
	"os"

	"github.com/mvm-dev/mvm/internal/seccomp"
)

// sandbox puts every thread of mvm under the run allow-list
// (docs/seccomp.md). Run calls it when setup is done: the VM, vCPUs,
// devices, profiling sources and the metrics listener exist, and what
// remains is running, rebooting and reporting.
func (m *VM) sandbox() error {
	prog, err := seccomp.Assemble(seccomp.Arch, seccomp.Run(os.Getpid(), m.cfg.Profile && m.cfg.ProfileLight))
	if err != nil {
		return err
	}
	if err := seccomp.Install(prog); err != nil {
		return fmt.Errorf("%w (run with --seccomp=false to go without)", err)
	}
	m.log.Debug("seccomp filter installed on every thread", "instructions", len(prog))
	return m.afterSandboxHook()
}
