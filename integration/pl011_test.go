//go:build linux && arm64

package integration

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// pl011Cmd is the guest side of TestLinuxPL011Console: it reports the
// kernel's consoles and how it probed the UART, asks for a line on its
// console (/dev/console, the init's stdin), answers it in capitals (so the
// answer is not the tty's echo of the input) and reports the UART's
// interrupt count, all through the tty write path.
const pl011Cmd = `echo "mvm-pl011: consoles $(cat /proc/consoles | tr '\n' ';')"
dmesg | grep -m1 'ttyAMA0 at MMIO' | sed 's/^.*\] /mvm-pl011: probe /'
dmesg | grep -m1 'earlycon:' | sed 's/^.*\] /mvm-pl011: /'
echo "mvm-pl011: ready"
read -r line
echo "mvm-pl011: got $(echo "$line" | tr a-z A-Z)"
echo "mvm-pl011: irq $(grep -m1 pl011 /proc/interrupts | tr -s ' ')"`

// TestLinuxPL011Console boots Debian's arm64 kernel with --serial pl011
// and the default command line for it (console=ttyAMA0 earlycon=pl011):
// the amba-pl011 driver must probe the PL011 through its PrimeCell ids and
// APB clock, be the kernel's console, carry the init's output, and receive
// interactively: a line written to mvm's stdin once the guest asks for it
// reaches the guest's shell through the RX interrupts, and its reply
// comes back.
func TestLinuxPL011Console(t *testing.T) {
	kernel := env(t, "MVM_LINUX")
	initrd := initrdWithCmd(t, pl011Cmd)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	var out lockedBuffer
	sent := make(chan struct{})
	go func() {
		deadline := time.Now().Add(4 * time.Minute)
		for time.Now().Before(deadline) {
			if strings.Contains(out.String(), "mvm-pl011: ready") {
				// The guest's shell is reading its console now.
				pw.Write([]byte("hello pl011\n"))
				close(sent)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	r := mvmCmd(t, 5*time.Minute, func(c *exec.Cmd) {
		c.Stdin = pr
		c.Stdout = &out
	}, "run", "--kernel", kernel, "--initrd", initrd, "--serial", "pl011", "--append", "quiet "+noCryptoTests)
	stdout := strings.ReplaceAll(out.String(), "\r", "")
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "mvm-pl011: ") {
			t.Log(l)
		}
	}
	if r.code != 0 {
		t.Fatalf("exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", r.code, stdout, r.stderr)
	}
	select {
	case <-sent:
	default:
		t.Fatalf("the guest never asked for input\nstdout:\n%s", stdout)
	}
	m := regexp.MustCompile(`mvm-pl011: consoles (.*)`).FindStringSubmatch(stdout)
	if m == nil || !strings.HasPrefix(m[1], "ttyAMA0") || strings.Contains(m[1], "ttyS") {
		t.Errorf("/proc/consoles = %v, want ttyAMA0 alone\n%s", m, stdout)
	}
	if !regexp.MustCompile(`mvm-pl011: probe .*ttyAMA0 at MMIO 0x9000000 .* is a PL011`).MatchString(stdout) {
		t.Errorf("the kernel did not report ttyAMA0 at 0x9000000 as a PL011\n%s", stdout)
	}
	// The earlycon line: the driver's console name, the access width
	// (mmio32) and the address.
	if !regexp.MustCompile(`mvm-pl011: earlycon: pl0?11 at MMIO32 0x0*9000000 `).MatchString(stdout) {
		t.Errorf("the default command line's earlycon did not drive the PL011\n%s", stdout)
	}
	if !regexp.MustCompile(`mvm-guest: nproc 1\n`).MatchString(stdout) {
		t.Errorf("the init's output did not arrive\n%s", stdout)
	}
	if !strings.Contains(stdout, "mvm-pl011: got HELLO PL011\n") {
		t.Errorf("the guest did not answer the input line\n%s", stdout)
	}
	irq := regexp.MustCompile(`mvm-pl011: irq\s+\d+:\s+(\d+)\s`).FindStringSubmatch(stdout)
	if irq == nil || irq[1] == "0" {
		t.Errorf("no PL011 interrupts counted in /proc/interrupts: %v\n%s", irq, stdout)
	}
	if !strings.Contains(stdout, "mvm-guest: poweroff") {
		t.Errorf("the guest did not reach its poweroff line\n%s", stdout)
	}
}

// TestPL011GarbageGuest runs guest/payloads/pl011_garbage.s with --serial
// pl011: writes of every width and pattern over the PL011's whole 4 KiB
// (data, control, masks, clears, ids, reserved space), and reads of each
// width. mvm must survive them all (no panic, no stack trace), and once
// the payload puts the UART back in order its line must come out and the
// guest power off with status 0.
func TestPL011GarbageGuest(t *testing.T) {
	r := mvm(t, 2*time.Minute, "run", "--kernel", payload(t, "pl011_garbage.bin"), "--serial", "pl011", "--memory", "64M")
	if r.code != 0 {
		t.Fatalf("exit status %d, want 0\nstdout:\n%q\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "\nok pl011-garbage\n") {
		t.Errorf("the payload's line did not come out after the storm: %q", r.stdout)
	}
	if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
		t.Errorf("stderr shows a panic:\n%s", r.stderr)
	}
}
