//go:build linux && arm64

package integration

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/runsummary"
)

// smpOutput is what guest/payloads/smp.s printed, parsed.
type smpOutput struct {
	lines []string

	version                  uint64
	haveVersion              bool
	featCPUOn, featMigrate   *int64
	cpus                     int
	cpuMPIDR, cpuX0          map[int]uint64 // "cpu k mpidr .. x0 .." by k
	cpuLines                 map[int]int    // how many "cpu k" lines per k
	spinMPIDR, spinX0        uint64
	haveSpin                 bool
	onSpin, onAgain, onInval *int64
	affinityCPU1             *int64
	done                     bool
	errors                   []string // lines starting with "error", "cpu_on K ret" lines
	unknown                  []string
}

var (
	reVersion  = regexp.MustCompile(`^psci version 0x([0-9a-f]+)$`)
	reFeature  = regexp.MustCompile(`^features (cpu_on|migrate) (-?\d+)$`)
	reCPUs     = regexp.MustCompile(`^cpus (\d+)$`)
	reCPU      = regexp.MustCompile(`^cpu (\d+) mpidr 0x([0-9a-f]+) x0 0x([0-9a-f]+)$`)
	reSpin     = regexp.MustCompile(`^spin cpu1 mpidr 0x([0-9a-f]+) x0 0x([0-9a-f]+)$`)
	reOnFailed = regexp.MustCompile(`^cpu_on (\d+) ret (-?\d+)$`)
	reOnNamed  = regexp.MustCompile(`^cpu_on (spin|again|invalid) ret (-?\d+)$`)
	reAffinity = regexp.MustCompile(`^affinity cpu1 (-?\d+)$`)
)

func parseSMP(t *testing.T, stdout string) smpOutput {
	t.Helper()
	o := smpOutput{cpuMPIDR: map[int]uint64{}, cpuX0: map[int]uint64{}, cpuLines: map[int]int{}}
	hex := func(s string) uint64 {
		v, err := strconv.ParseUint(s, 16, 64)
		if err != nil {
			t.Fatalf("bad hex %q: %v", s, err)
		}
		return v
	}
	dec := func(s string) int64 {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("bad decimal %q: %v", s, err)
		}
		return v
	}
	ptr := func(s string) *int64 { v := dec(s); return &v }
	o.lines = strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	for _, l := range o.lines {
		l = strings.TrimRight(l, "\r")
		if m := reVersion.FindStringSubmatch(l); m != nil {
			o.version, o.haveVersion = hex(m[1]), true
		} else if m := reFeature.FindStringSubmatch(l); m != nil {
			if m[1] == "cpu_on" {
				o.featCPUOn = ptr(m[2])
			} else {
				o.featMigrate = ptr(m[2])
			}
		} else if m := reCPUs.FindStringSubmatch(l); m != nil {
			o.cpus = int(dec(m[1]))
		} else if m := reCPU.FindStringSubmatch(l); m != nil {
			k := int(dec(m[1]))
			o.cpuLines[k]++
			o.cpuMPIDR[k], o.cpuX0[k] = hex(m[2]), hex(m[3])
		} else if m := reSpin.FindStringSubmatch(l); m != nil {
			o.spinMPIDR, o.spinX0, o.haveSpin = hex(m[1]), hex(m[2]), true
		} else if m := reOnNamed.FindStringSubmatch(l); m != nil {
			switch m[1] {
			case "spin":
				o.onSpin = ptr(m[2])
			case "again":
				o.onAgain = ptr(m[2])
			case "invalid":
				o.onInval = ptr(m[2])
			}
		} else if m := reAffinity.FindStringSubmatch(l); m != nil {
			o.affinityCPU1 = ptr(m[1])
		} else if l == "smp test done" {
			o.done = true
		} else if strings.HasPrefix(l, "error") || reOnFailed.MatchString(l) {
			o.errors = append(o.errors, l)
		} else {
			o.unknown = append(o.unknown, l)
		}
	}
	return o
}

// kvmMPIDR is KVM's default MPIDR affinity for vCPU k.
func kvmMPIDR(k int) uint64 {
	return uint64(k&0xf) | uint64((k>>4)&0xff)<<8 | uint64((k>>12)&0xff)<<16
}

func checkInt(t *testing.T, name string, got *int64, want int64) {
	t.Helper()
	switch {
	case got == nil:
		t.Errorf("no %q line", name)
	case *got != want:
		t.Errorf("%s = %d, want %d", name, *got, want)
	}
}

// TestSMP boots guest/payloads/smp.s on N vCPUs: PSCI version and features,
// vCPU count by AFFINITY_INFO, parallel CPU_ON of every secondary with its
// own context_id, CPU_OFF, ALREADY_ON for a running vCPU, INVALID_PARAMETERS
// for a missing one, SYSTEM_OFF with a vCPU still running. Both PSCI modes
// must give the same answers.
func TestSMP(t *testing.T) {
	cases := []struct {
		cpus    int
		mode    string
		timeout time.Duration
	}{
		{4, "user", 2 * time.Minute},
		{4, "kernel", 2 * time.Minute},
		{128, "user", 10 * time.Minute},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%d", c.mode, c.cpus), func(t *testing.T) {
			args := []string{"run", "--kernel", payload(t, "smp.bin"), "--cpus", strconv.Itoa(c.cpus), "--psci", c.mode}
			// The largest boot also makes the run report (and its JSON
			// for the host's browser test, see reportFixture).
			var res, page string
			if c.cpus == 128 {
				dir := t.TempDir()
				res, page = filepath.Join(dir, "smp128.json"), filepath.Join(dir, "smp128.html")
				args = append(args, "--profile", "--profile-out", os.DevNull, "--result-json", res, "--report", page)
			} else {
				// The small boots check the boot phases in the result
				// (a console marker among them).
				res = filepath.Join(t.TempDir(), "result.json")
				args = append(args, "--result-json", res, "--marker", "done=^smp test done$")
			}
			r := mvm(t, c.timeout, args...)
			if page != "" {
				checkRunReport(t, res, page, c.cpus)
			} else if r.code == 0 {
				checkPhases(t, readSummary(t, res), c.mode)
			}
			defer func() {
				if t.Failed() {
					t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
				}
			}()
			if r.code != 0 {
				t.Errorf("exit status %d, want 0 (SYSTEM_OFF)", r.code)
			}
			o := parseSMP(t, r.stdout)
			for _, l := range o.errors {
				t.Errorf("guest reported: %s", l)
			}
			for _, l := range o.unknown {
				t.Errorf("unexpected console line %q", l)
			}
			if !o.haveVersion {
				t.Errorf("no psci version line")
			} else if o.version != 0x10001 {
				t.Errorf("PSCI_VERSION = %#x, want 0x10001 (1.1)", o.version)
			}
			checkInt(t, "features cpu_on", o.featCPUOn, 0)
			checkInt(t, "features migrate", o.featMigrate, -1)
			if o.cpus != c.cpus {
				t.Errorf("the guest counted %d vCPUs, want %d", o.cpus, c.cpus)
			}
			if len(o.cpuLines) != c.cpus-1 {
				t.Errorf("%d secondaries reported, want %d", len(o.cpuLines), c.cpus-1)
			}
			for k := 1; k < c.cpus; k++ {
				switch n := o.cpuLines[k]; {
				case n == 0:
					t.Errorf("secondary %d did not report", k)
					continue
				case n > 1:
					t.Errorf("secondary %d reported %d times", k, n)
				}
				if got, want := o.cpuMPIDR[k], kvmMPIDR(k); got != want {
					t.Errorf("secondary %d: MPIDR affinity %#x, want %#x", k, got, want)
				}
				if got, want := o.cpuX0[k], uint64(0x1000+k); got != want {
					t.Errorf("secondary %d: X0 on entry %#x, want the context_id %#x", k, got, want)
				}
			}
			for k := range o.cpuLines {
				if k < 1 || k >= c.cpus {
					t.Errorf("a line for secondary %d, which does not exist", k)
				}
			}
			if c.cpus > 1 {
				checkInt(t, "cpu_on spin ret", o.onSpin, 0)
				if !o.haveSpin {
					t.Errorf("no 'spin cpu1' line: vCPU 1 did not start a second time")
				} else if o.spinMPIDR != kvmMPIDR(1) || o.spinX0 != 0x2001 {
					t.Errorf("restarted vCPU 1: mpidr %#x x0 %#x, want %#x and 0x2001", o.spinMPIDR, o.spinX0, kvmMPIDR(1))
				}
				checkInt(t, "cpu_on again ret", o.onAgain, -4)  // ALREADY_ON
				checkInt(t, "affinity cpu1", o.affinityCPU1, 0) // ON
			}
			checkInt(t, "cpu_on invalid ret", o.onInval, -2) // INVALID_PARAMETERS
			if !o.done {
				t.Errorf("no 'smp test done' line")
			}
		})
	}
}

var reHammer = regexp.MustCompile(`(?m)^hammer cpus (\d+) rounds (\d+) starts (\d+) errors (\d+) mismatches (\d+) timeouts (\d+) badentry (\d+)$`)

// TestCPUOnHammer runs guest/payloads/cpuhammer.s: 24 rounds in which
// every secondary of a 64- or 96-vCPU guest is powered on (by the boot CPU
// and, racing it, by its neighbour) and powers itself off again. With PSCI
// in mvm every start goes through the park/wake path of vcpu.Loop; a lost
// CPU_ON or wake-up shows as a timeout, a double start of one CPU_ON as a
// mismatch between successful CPU_ONs and starts, and a start whose entry
// state was not reset after the state the vCPU left at its CPU_OFF (PSTATE,
// SCTLR_EL1: vcpu.rearm) as a bad entry.
func TestCPUOnHammer(t *testing.T) {
	for _, c := range []struct {
		cpus int
		mode string
	}{{64, "user"}, {96, "user"}, {64, "kernel"}} {
		t.Run(fmt.Sprintf("%s/%d", c.mode, c.cpus), func(t *testing.T) {
			r := mvm(t, 5*time.Minute, "run", "--kernel", payload(t, "cpuhammer.bin"),
				"--cpus", strconv.Itoa(c.cpus), "--psci", c.mode)
			if r.code != 0 {
				t.Errorf("exit status %d, want 0 (SYSTEM_OFF)", r.code)
			}
			if r.stderr != "" {
				t.Errorf("mvm logged:\n%s", r.stderr)
			}
			m := reHammer.FindStringSubmatch(r.stdout)
			if m == nil {
				t.Fatalf("no hammer line in:\n%s", r.stdout)
			}
			n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
			if n(1) != c.cpus {
				t.Errorf("the guest counted %d vCPUs, want %d", n(1), c.cpus)
			}
			// Every secondary starts at least once a round; a neighbour's
			// CPU_ON may start one again after it went off.
			if min := n(2) * (c.cpus - 1); n(3) < min {
				t.Errorf("%d starts, want at least %d (%d rounds x %d secondaries)", n(3), min, n(2), c.cpus-1)
			}
			for i, what := range map[int]string{4: "unexpected PSCI results", 5: "rounds where successful CPU_ONs != starts", 6: "waits past their deadline (lost CPU_ON or wake-up)",
				7: "starts with an entry state other than PSCI's (EL1h, DAIF masked, MMU, caches and alignment check off)"} {
				if n(i) != 0 {
					t.Errorf("%d %s", n(i), what)
				}
			}
			t.Logf("%s", m[0])
		})
	}
}

// checkPhases checks a result's phases against docs/boot-phases.md's
// definitions, from the moments the same file records: the phases a
// payload boot has (no userspace marker; a console marker "done"), each
// the difference of its two moments, and none other.
func checkPhases(t *testing.T, s runsummary.Summary, mode string) {
	t.Helper()
	first := s.EnteredNS[0]
	firstOn, lastIn := int64(-1), int64(-1)
	for i := 1; i < len(s.CPUOnNS); i++ {
		if firstOn < 0 || s.CPUOnNS[i] < firstOn {
			firstOn = s.CPUOnNS[i]
		}
		lastIn = max(lastIn, s.EnteredNS[i])
	}
	done, ok := s.ConsoleNS["done"]
	if !ok || first <= 0 || done <= first {
		t.Fatalf("first KVM_RUN at %d, console marker done at %d (seen %v)", first, done, ok)
	}
	want := map[string]int64{
		runsummary.PhaseVMMSetup: first, "console:done": done - first, runsummary.PhaseTotal: s.PhasesNS[runsummary.PhaseTotal],
	}
	if mode == "user" {
		if firstOn <= first || lastIn <= firstOn {
			t.Fatalf("CPU_ONs from %d, last secondary in at %d, first KVM_RUN %d", firstOn, lastIn, first)
		}
		want[runsummary.PhaseBootToSMP] = firstOn - first
		want[runsummary.PhaseSecondaries] = lastIn - firstOn
	}
	if !maps.Equal(s.PhasesNS, want) || s.PhasesNS[runsummary.PhaseTotal] < done {
		t.Errorf("phases_ns %v, want %v (total past the marker)", s.PhasesNS, want)
	}
}
