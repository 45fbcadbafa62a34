package vmm

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/mvm-dev/mvm/runsummary"
)

// ResetAction is what a guest SYSTEM_RESET does.
type ResetAction string

const (
	// ResetExit ends mvm with status 0.
	ResetExit ResetAction = "exit"
	// ResetReboot reboots the guest in the same process.
	ResetReboot ResetAction = "reboot"
)

// ParseResetAction checks an --on-reset value.
func ParseResetAction(s string) (ResetAction, error) {
	switch a := ResetAction(s); a {
	case ResetExit, ResetReboot:
		return a, nil
	}
	return "", fmt.Errorf("unknown --on-reset action %q: use exit or reboot", s)
}

// Serial selects the console UART at UARTBase (--serial).
type Serial string

const (
	// Serial8250 is a 16550-compatible UART (Linux: ttyS0), the default.
	Serial8250 Serial = "8250"
	// SerialPL011 is an Arm PL011 (Linux: ttyAMA0), the UART of QEMU's
	// virt machine, for kernels built without the 8250 driver.
	SerialPL011 Serial = "pl011"
)

// ParseSerial checks a --serial value.
func ParseSerial(s string) (Serial, error) {
	switch k := Serial(s); k {
	case Serial8250, SerialPL011:
		return k, nil
	}
	return "", fmt.Errorf("unknown UART %q: use 8250 (ttyS0, the default) or pl011 (ttyAMA0)", s)
}

// Port is one named port of the virtio-console (Config.Ports): the guest
// finds it by Name under /sys/class/virtio-ports. In is given to the guest
// once it opens the port, and its end closes the host side (the guest
// reads end-of-file); what the guest writes goes to Out. A chain on the
// last port reaches its Out after whatever the guest queued on the other
// ports before it.
type Port struct {
	Name string
	In   io.Reader
	Out  io.Writer
}

// MinMemory is the least guest RAM: room for a payload, the DTB and the
// stack it needs. (The other limit that does not depend on the host is
// runsummary.MaxCPUs.)
const MinMemory = 16 << 20

// Config describes one VM. The CLI fills it from flags.
type Config struct {
	Kernel  string // kernel file (OpenKernel's formats), build tree or flat binary
	Initrd  string // optional
	Cmdline string
	CPUs    int
	Memory  uint64 // bytes
	PSCI    runsummary.PSCIMode
	OnReset ResetAction
	// PMU gives every vCPU KVM's PMUv3 (--pmu); New fails where the host
	// lacks KVM_CAP_ARM_PMU_V3.
	PMU bool

	// Serial is the console UART; empty means Serial8250.
	Serial Serial

	Console   io.Writer // guest serial output; nil discards it
	ConsoleIn io.Reader // optional guest serial input
	// Markers are console-line markers (--marker) watched besides the
	// built-in ones (DefaultConsoleMarkers).
	Markers []ConsoleMarker

	// Profile reads KVM's stats fd and the kvm_entry/kvm_exit tracepoints
	// besides counting userspace exits, and puts an exits.Report in the
	// Result.
	Profile bool
	// ProfileLight, with Profile, samples the tracepoints instead of
	// following every exit (mvm run --profile=light, exits/profile's
	// Config.Light): exact stats fd counts, the other reasons estimated.
	ProfileLight bool
	// ProfileSources limits the profile to these sources (exits.Source*
	// names); empty means every source the host allows.
	ProfileSources []string
	// ProfilePlain keeps the tracepoint profile to what perf kvm stat
	// has (counts and times per reason): no breakdown below the
	// exception class, percentiles, phases or guest code. For measuring
	// what those cost.
	ProfilePlain bool
	// ProfileVia is how the tracepoints are read: "auto" or "" (BPF
	// programs where the kernel allows them, else perf rings), "bpf" or
	// "perf" (source.ViaAuto, ViaBPF, ViaPerf in exits/source).
	ProfileVia string
	// GuestSymbols is a System.map, /proc/kallsyms dump or vmlinux ELF
	// of the guest kernel; the profile then names the guest functions
	// the exits came from.
	GuestSymbols string
	// MetricsAddr, if set, serves Prometheus metrics (/metrics) on this
	// HOST:PORT while the VM runs.
	MetricsAddr string

	// Disks are virtio-blk devices (/dev/vda, /dev/vdb, ... in order),
	// Nets virtio-net devices on taps; RNG adds a virtio-rng device.
	Disks []Disk
	Nets  []NetDevice
	RNG   bool
	// Shares are virtio-fs devices, each served by its own virtiofsd
	// (Virtiofsd, default DefaultVirtiofsd); guest RAM is then a shared
	// memfd the backends map.
	Shares    []Share
	Virtiofsd string
	// Ports, when set, adds a multiport virtio-console after every other
	// virtio device, with these named ports (command mode's streams).
	Ports []Port
	// InitrdArchive is an initramfs written straight into guest RAM at
	// load (command mode's, whose largest file, mvm's own binary, then
	// goes from the page cache to the guest without a copy in mvm's
	// heap), used when Initrd is empty.
	InitrdArchive Archive

	// Seccomp puts every mvm thread under the run allow-list once setup is
	// done (docs/seccomp.md); a call outside it kills mvm.
	Seccomp bool

	Logger *slog.Logger
	// Start is when the VMM started (process start) for the vmm_setup
	// phase; zero means when New is called.
	Start time.Time
}

// Validate checks what can be checked without touching files or KVM.
func (c *Config) Validate() error {
	if c.Kernel == "" {
		return errors.New("no kernel given: pass --kernel PATH (an arm64 Image, Image.gz, EFI zboot vmlinuz, kernel build tree or flat binary)")
	}
	if c.CPUs < 1 {
		return fmt.Errorf("--cpus %d: a VM needs at least 1 vCPU", c.CPUs)
	}
	if c.CPUs > runsummary.MaxCPUs {
		return fmt.Errorf("--cpus %d: mvm supports at most %d vCPUs", c.CPUs, runsummary.MaxCPUs)
	}
	if c.Memory < MinMemory {
		return fmt.Errorf("--memory %s is too small: mvm needs at least %s", FormatSize(c.Memory), FormatSize(MinMemory))
	}
	if c.Memory > MaxMemory {
		return fmt.Errorf("--memory %s is too large: the guest memory map holds at most %s", FormatSize(c.Memory), FormatSize(MaxMemory))
	}
	if c.Memory%PageSize != 0 {
		return fmt.Errorf("--memory %s is not a multiple of 64 KiB", FormatSize(c.Memory))
	}
	if _, err := runsummary.ParsePSCIMode(string(c.PSCI)); err != nil {
		return fmt.Errorf("--psci: %w", err)
	}
	if _, err := ParseResetAction(string(c.OnReset)); err != nil {
		return err
	}
	if c.MetricsAddr != "" {
		if err := CheckListenAddr(c.MetricsAddr); err != nil {
			return fmt.Errorf("--metrics-addr %w", err)
		}
	}
	if c.Serial != "" {
		if _, err := ParseSerial(string(c.Serial)); err != nil {
			return fmt.Errorf("--serial: %w", err)
		}
	}
	return c.validateVirtio()
}

// FormatSize renders a byte count in the largest exact binary unit.
func FormatSize(v uint64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "T"}, {30, "G"}, {20, "M"}, {10, "K"}} {
		if v != 0 && v%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", v>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", v)
}
