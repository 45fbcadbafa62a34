// Command mvm is a micro-VM hypervisor for arm64 Linux hosts with /dev/kvm:
// it boots arm64 Linux Images and bare-metal payloads (mvm run), reports what
// the host's KVM offers (mvm caps), and later profiles exits and benchmarks
// boots. The commands only turn flags into a vmm.Config; the work is done by
// the packages under the module root.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// exitError carries an exit status with an optional one-line message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// usageError marks a bad command line (exit status 2).
type usageError struct{ error }

func main() {
	start := time.Now()
	root := newRootCmd(start)
	err := root.Execute()
	if err == nil {
		return
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(os.Stderr, "mvm:", ee.msg)
		}
		os.Exit(ee.code)
	}
	fmt.Fprintln(os.Stderr, "mvm:", err)
	var ue usageError
	if errors.As(err, &ue) || isCobraUsageError(err) {
		os.Exit(2)
	}
	os.Exit(1)
}

func newRootCmd(start time.Time) *cobra.Command {
	root := &cobra.Command{
		Use:   "mvm",
		Short: "mvm: a micro-VM hypervisor for arm64 Linux on KVM",
		Long: `mvm boots arm64 Linux kernels and bare-metal payloads on /dev/kvm with a
serial console, services PSCI in userspace, and measures what the guest does.

  mvm caps                                  what this host's KVM offers
  mvm run --kernel Image --cpus 4 --memory 1G --initrd initrd.gz
                                            boot a guest`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w (see 'mvm %s --help')", err, c.Name())}
	})
	root.AddCommand(newRunCmd(start), newCapsCmd(), newVersionCmd(), newBenchCmd(start))
	return root
}

// isCobraUsageError recognises cobra's own argument errors.
func isCobraUsageError(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires ", "invalid argument"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
