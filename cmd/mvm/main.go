// Command mvm is a micro-VM hypervisor for arm64 Linux hosts with /dev/kvm:
// it boots arm64 Linux Images and bare-metal payloads (mvm run), reports what
// the host's KVM offers (mvm caps), benchmarks boots (mvm bench), profiles
// the exits of another VMM's VM (mvm profile) and renders saved results as
// HTML (mvm report). The commands only turn flags into configurations (a
// vmm.Config, bench settings); the work is done by the packages under the
// module root.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mvm-dev/mvm/cmdmode"
	"github.com/mvm-dev/mvm/vmm"
)

// exitError carries an exit status with an optional one-line message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// usageError marks bad input (exit status 2): a bad command line, or a
// file it names that is missing, unreadable or of the wrong kind. The
// vmm package marks its own such errors with vmm.InputError.
type usageError struct{ error }

// init keeps the main goroutine on the main thread. Each vCPU goroutine
// locks the thread it starts on and names it mvm-vcpu-N; were that the
// main thread, its name would become the process's (/proc/PID/comm: what
// ps and top show, and what mvm profile --pid matches VMMs by).
func init() { runtime.LockOSThread() }

func main() {
	// In a command-mode guest this binary is the init (package cmdmode).
	if cmdmode.IsGuestInit() {
		cmdmode.Main()
	}
	mainWith(vmm.CheckHost)
}

// mainWith is main with checkHost, what mvm bench asks of the host before
// its first boot (vmm.CheckHost). The tests' fake mvm, whose boots need no
// KVM, passes one that accepts any host.
func mainWith(checkHost func() error) {
	start := time.Now()
	withRuntimeSettings(start)
	start = startBeforeExec(start)
	root := newRootCmd(start, checkHost)
	err := root.Execute()
	if err == nil {
		return
	}
	code, msg := exitStatus(err)
	if msg != "" {
		fmt.Fprintln(os.Stderr, "mvm:", msg)
	}
	os.Exit(code)
}

// exitStatus maps an error to mvm's exit status and its one-line message by
// the error's type, never its text: an EINVAL from a KVM ioctl says
// "invalid argument" too, and is not a bad command line. Bad input
// (usageError, vmm.InputError) is 2, anything else 1.
func exitStatus(err error) (int, string) {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code, ee.msg
	}
	var ue usageError
	var ie *vmm.InputError
	if errors.As(err, &ue) || errors.As(err, &ie) {
		return 2, err.Error()
	}
	return 1, err.Error()
}

func newRootCmd(start time.Time, checkHost func() error) *cobra.Command {
	root := &cobra.Command{
		Use:   "mvm",
		Short: "mvm: a micro-VM hypervisor for arm64 Linux on KVM",
		Long: `mvm boots arm64 Linux kernels and bare-metal payloads on /dev/kvm with a
serial console, services PSCI in userspace, and measures what the guest does.

  mvm caps                                  what this host's KVM offers
  mvm run --kernel Image --cpus 4 --memory 1G --initrd initrd.gz
                                            boot a guest
  mvm bench --kernel Image --variant B:...  compare boots
  mvm report run.json -o run.html           an HTML page of a saved result`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
		// With Args set, cobra leaves an unknown subcommand to it (and a
		// runnable root prints the help) instead of returning an untyped
		// error of its own.
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			msg := fmt.Sprintf("unknown command %q (see 'mvm --help')", args[0])
			if s := c.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return errors.New(msg)
		},
		RunE: func(c *cobra.Command, args []string) error { return c.Help() },
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if c.Name() == "run" && commandGiven(os.Args[1:]) {
			return &exitError{cmdmode.ExitMVM, fmt.Sprintf("%v (see 'mvm run --help')", err)}
		}
		return usageError{fmt.Errorf("%w (see 'mvm %s --help')", err, c.Name())}
	})
	root.AddCommand(newRunCmd(start), newCapsCmd(), newVersionCmd(), newBenchCmd(start, checkHost), newProfileCmd(), newReportCmd())
	typeArgErrors(root)
	return root
}

// typeArgErrors makes the positional-argument checks of c and its
// subcommands return usage errors: cobra's own are plain errors.
func typeArgErrors(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		typeArgErrors(sub)
	}
}
