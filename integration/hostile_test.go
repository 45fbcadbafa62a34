//go:build linux && arm64

package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/runsummary"
)

func readSummary(t *testing.T, path string) runsummary.Summary {
	t.Helper()
	return readJSON[runsummary.Summary](t, path)
}

// TestHostileGuest runs guest/payloads/hostile.s on 2 vCPUs: an MMIO storm
// over 256 unmapped addresses, 25 unimplemented SMCCC function IDs by HVC
// and SMC, and CPU_ON with a nonexistent MPIDR, entry points outside RAM
// and misaligned, and the caller as target. mvm answers each as the
// payload expects, logs at most 16 addresses and 16 function IDs (and one
// line each saying it stops), counts every access and every call it
// answered NOT_SUPPORTED, counts the four CPU_ONs it refused for their
// arguments by result (logging the first of each), and the guest powers
// off (exit 0).
func TestHostileGuest(t *testing.T) {
	res := filepath.Join(t.TempDir(), "result.json")
	r := mvm(t, time.Minute, "run", "--kernel", payload(t, "hostile.bin"), "--cpus", "2", "--memory", "64M", "--result-json", res)
	if r.code != 0 {
		t.Fatalf("exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, name := range []string{"mmio-storm", "unknown-fids", "cpu-on-no-such-mpidr", "cpu-on-entry-outside-ram",
		"cpu-on-entry-beyond-ram", "cpu-on-entry-misaligned", "cpu-on-self"} {
		if !strings.Contains(r.stdout, "ok "+name+"\n") {
			t.Errorf("guest check %s did not pass", name)
		}
	}
	if strings.Contains(r.stdout, "FAIL") {
		t.Errorf("guest:\n%s", r.stdout)
	}
	s := readSummary(t, res)
	if s.Exit != runsummary.ExitPowerOff {
		t.Errorf("result exit %q, want %q", s.Exit, runsummary.ExitPowerOff)
	}
	if s.Unmapped != 2*256 {
		t.Errorf("unmapped_accesses %d, want %d (a read and a write at 256 addresses)", s.Unmapped, 2*256)
	}
	// 20 IDs in the PSCI ranges reach mvm, by HVC and by SMC; KVM answers
	// the 5 outside them.
	if s.UnknownSMCCC != 2*20 {
		t.Errorf("unknown_smccc_calls %d, want %d", s.UnknownSMCCC, 2*20)
	}
	// CPU_ON to a nonexistent MPIDR: INVALID_PARAMETERS; entry points
	// below RAM, beyond it and misaligned: INVALID_ADDRESS. The one on
	// the caller itself (ALREADY_ON) is a valid call.
	wantRejected := []runsummary.PSCIRejection{{Function: "CPU_ON", Result: "INVALID_ADDRESS", Count: 3},
		{Function: "CPU_ON", Result: "INVALID_PARAMETERS", Count: 1}}
	if s.PSCIRejectedCalls != 4 || !slices.Equal(s.PSCIRejected, wantRejected) {
		t.Errorf("psci_rejected_calls %d, psci_rejected %+v; want 4, %+v", s.PSCIRejectedCalls, s.PSCIRejected, wantRejected)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	count := func(s string) (n int) {
		for _, l := range lines {
			if strings.Contains(l, s) {
				n++
			}
		}
		return n
	}
	if n := count("guest accessed an unmapped address"); n != 16 {
		t.Errorf("%d unmapped addresses logged, want 16", n)
	}
	if n := count("guest made an SMCCC call mvm does not implement"); n != 16 {
		t.Errorf("%d unknown function IDs logged, want 16", n)
	}
	if n := count("further ones are counted"); n != 2 {
		t.Errorf("%d 'further ones' lines, want 2 (addresses, function IDs)", n)
	}
	for _, res := range []string{"INVALID_ADDRESS", "INVALID_PARAMETERS"} {
		n := 0
		for _, l := range lines {
			if strings.Contains(l, "PSCI call with invalid arguments") && strings.Contains(l, "function=CPU_ON result="+res+" ") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d CPU_ON %s lines logged, want 1", n, res)
		}
	}
	if len(lines) != 16+16+2+2 || strings.Contains(r.stderr, "panic") {
		t.Errorf("stderr has %d lines, want 36:\n%s", len(lines), r.stderr)
	}
}

// procUse is what /proc says a process holds.
type procUse struct {
	fds, threads int
	rssKB        int
}

func readProcUse(t *testing.T, pid int) procUse {
	t.Helper()
	var u procUse
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	u.fds, u.threads = len(fds), len(tasks)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &u.rssKB)
		}
	}
	return u
}

// TestRebootStorm: guest/payloads/reboots.s resets the machine 100 times
// with --on-reset reboot on 2 vCPUs, then powers off. Watched from outside
// through /proc at boot 30 and at boot 101, mvm's fds and threads grow by
// at most the runtime's own one-offs (2), its RSS by less than 4 MiB; it exits 0 and reports 100
// reboots.
func TestRebootStorm(t *testing.T) {
	res := filepath.Join(t.TempDir(), "result.json")
	cmd := exec.Command(env(t, "MVM_BIN"), "run", "--kernel", payload(t, "reboots.bin"), "--cpus", "2",
		"--memory", "64M", "--on-reset", "reboot", "--result-json", res)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var early, late procUse
	sc := bufio.NewScanner(out)
	boots := 0
	for sc.Scan() {
		boots++
		switch sc.Text() {
		case "boot 30": // past the runtime's own warm-up
			early = readProcUse(t, cmd.Process.Pid)
		case "boot 101": // the last boot powers off
			late = readProcUse(t, cmd.Process.Pid)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("mvm: %v\n%s", err, errb.String())
	}
	t.Logf("%d boots; at boot 30 %+v, at boot 101 %+v", boots, early, late)
	if boots != 101 || early.fds == 0 || late.fds == 0 {
		t.Fatalf("%d boots seen (want 101), samples %+v %+v", boots, early, late)
	}
	// The Go runtime creates an fd (its poller) or a thread when it first
	// needs one, and its heap settles; a leak per reboot would show 71
	// times over, so the bounds leave room for the one-offs only.
	if late.fds > early.fds+2 || late.threads > early.threads+2 {
		t.Errorf("fds %d -> %d, threads %d -> %d over 71 reboots: want no growth", early.fds, late.fds, early.threads, late.threads)
	}
	if late.rssKB-early.rssKB >= 4096 {
		t.Errorf("RSS grew by %d KiB over 71 reboots", late.rssKB-early.rssKB)
	}
	if s := readSummary(t, res); s.Reboots != 100 || s.Exit != runsummary.ExitPowerOff {
		t.Errorf("result: %d reboots, exit %q; want 100, %q", s.Reboots, s.Exit, runsummary.ExitPowerOff)
	}
	if errb.Len() != 0 {
		t.Errorf("stderr: %s", errb.String())
	}
}

// The rounds and CPU_ON targets of each vCPU in guest/payloads/pscistorm.s
// (ROUNDS, TARGETS there).
const (
	stormRounds  = 12
	stormTargets = 4
)

// PSCI results (DEN0022D.b table 6) and AFFINITY_INFO states (§5.7).
const (
	psciSuccess       = 0
	psciNotSupported  = -1
	psciInvalidParams = -2
	psciAlreadyOn     = -4
	psciOnPending     = -5
	psciInvalidAddr   = -9
	affOn, affOff     = 0, 1
	affOnPending      = 2
)

var (
	reStorm     = regexp.MustCompile(`^storm cpus (\d+) rounds (\d+) starts (\d+) successes (\d+) offret (\d+) timeouts (\d+)$`)
	reStormKind = regexp.MustCompile(`^storm (\w+)((?: \d+){16})$`)
)

// stormRun is what one run of pscistorm.bin showed: the guest's counts
// (results by X0 per kind of call) and mvm seen from outside.
type stormRun struct {
	cpus, rounds, starts, successes, offret, timeouts int
	// results[kind][x0] counts the calls of a kind that returned x0;
	// x0 = 99 stands for anything outside -9..5.
	results     map[string]map[int]int
	early, late procUse
	code        int
	stderr      string
	summary     runsummary.Summary
	sawRound1   bool
	unparsed    []string
}

func runStorm(t *testing.T, cpus int, mode string) stormRun {
	t.Helper()
	res := filepath.Join(t.TempDir(), "result.json")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env(t, "MVM_BIN"), "run", "--kernel", payload(t, "pscistorm.bin"),
		"--cpus", strconv.Itoa(cpus), "--psci", mode, "--result-json", res)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	r := stormRun{results: map[string]map[int]int{}}
	num := func(s string) int { v, _ := strconv.Atoi(s); return v }
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		l := sc.Text()
		if l == "storm round 1" {
			r.sawRound1 = true
			r.early = readProcUse(t, cmd.Process.Pid)
		} else if m := reStorm.FindStringSubmatch(l); m != nil {
			// The guest prints this line first and ~700 more bytes
			// after it, each a UART exit: mvm is still there.
			r.late = readProcUse(t, cmd.Process.Pid)
			r.cpus, r.rounds, r.starts, r.successes, r.offret, r.timeouts = num(m[1]), num(m[2]), num(m[3]), num(m[4]), num(m[5]), num(m[6])
		} else if m := reStormKind.FindStringSubmatch(l); m != nil {
			row := map[int]int{}
			for i, f := range strings.Fields(m[2]) {
				if n := num(f); n != 0 {
					x0 := i - 9
					if i == 15 {
						x0 = 99
					}
					row[x0] = n
				}
			}
			r.results[m[1]] = row
		} else {
			r.unparsed = append(r.unparsed, l)
		}
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("mvm did not finish within 3 minutes (a hang)\nstderr:\n%s", errb.String())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	r.stderr = errb.String()
	t.Logf("%s/%d: exit %d in %v; /proc after round 1 %+v, at the end %+v", mode, cpus, r.code, time.Since(start).Round(time.Millisecond), r.early, r.late)
	if r.code == 0 {
		r.summary = readSummary(t, res)
	}
	return r
}

// TestPSCIStorm runs guest/payloads/pscistorm.s: every vCPU at once, for
// 12 rounds each, CPU_ONs its four successors and asks AFFINITY_INFO about
// them, asks about itself and about an MPIDR that does not exist, calls
// CPU_ON with that MPIDR and on itself with an entry point below RAM and a
// misaligned one, makes an unimplemented SMCCC call by HVC and by SMC, and
// powers itself off (the boot vCPU excepted) to be restarted by whoever
// CPU_ONs it next. With PSCI in mvm and in KVM, on 16 and 64 vCPUs: mvm
// exits 0 after SYSTEM_OFF; every result the guest saw is one DEN0022
// allows for that call, exactly so where the spec leaves no choice;
// successful CPU_ONs equal starts (no start lost or doubled); no CPU_OFF
// returns; mvm counts every unknown call it answered and logs 16 function
// IDs plus one line, however many vCPUs race to be logged, and counts every
// call it refused for its arguments, logging one line per function and
// result (AFFINITY_INFO's at info); its fds do not
// grow over the storm, nor its threads beyond the Go runtime's own.
func TestPSCIStorm(t *testing.T) {
	for _, c := range []struct {
		cpus int
		mode string
	}{{16, "user"}, {16, "kernel"}, {64, "user"}, {64, "kernel"}} {
		t.Run(fmt.Sprintf("%s/%d", c.mode, c.cpus), func(t *testing.T) {
			r := runStorm(t, c.cpus, c.mode)
			if r.code != 0 {
				t.Fatalf("exit status %d, want 0 (SYSTEM_OFF)\nstderr:\n%s", r.code, r.stderr)
			}
			if len(r.unparsed) > 0 || !r.sawRound1 || r.cpus == 0 {
				t.Fatalf("guest output: unparsed lines %q, round-1 line %v, summary line %v", r.unparsed, r.sawRound1, r.cpus != 0)
			}
			if r.cpus != c.cpus || r.rounds != stormRounds {
				t.Fatalf("the guest counted %d vCPUs and ran %d rounds, want %d and %d", r.cpus, r.rounds, c.cpus, stormRounds)
			}
			n := c.cpus * stormRounds // calls of each garbage kind
			if r.successes != r.starts {
				t.Errorf("%d CPU_ONs returned SUCCESS but secondaries started %d times", r.successes, r.starts)
			}
			// Each secondary runs a round per start, then one more start
			// finds its rounds over.
			if min := (c.cpus - 1) * (stormRounds + 1); r.starts < min {
				t.Errorf("%d starts, want at least %d", r.starts, min)
			}
			if r.offret != 0 || r.timeouts != 0 {
				t.Errorf("%d CPU_OFFs returned, %d waits timed out (a lost CPU_ON or wake-up)", r.offret, r.timeouts)
			}
			// The spec's answers. Where it allows several, the counts
			// must only fall among them.
			only := func(kind string, allowed ...int) (total int) {
				t.Helper()
				for x0, k := range r.results[kind] {
					if !slices.Contains(allowed, x0) {
						t.Errorf("%s: %d calls returned %d, allowed %v", kind, k, x0, allowed)
					}
					total += k
				}
				return total
			}
			exactly := func(kind string, x0, want int) {
				t.Helper()
				only(kind, x0)
				if got := r.results[kind][x0]; got != want {
					t.Errorf("%s: %d calls returned %d, want %d", kind, got, x0, want)
				}
			}
			// CPU_ON of an existing target with a good entry point
			// (§5.6.2): SUCCESS, ALREADY_ON or ON_PENDING.
			only("cpu_on", psciSuccess, psciAlreadyOn, psciOnPending)
			if got := r.results["cpu_on"][psciSuccess]; got != r.successes {
				t.Errorf("cpu_on SUCCESS column %d, summary %d", got, r.successes)
			}
			// AFFINITY_INFO of an existing vCPU (§5.7): ON, OFF or
			// ON_PENDING; of the caller: ON.
			if got, min := only("affinity", affOn, affOff, affOnPending), n*min(stormTargets, c.cpus-1); got < min {
				t.Errorf("%d AFFINITY_INFO calls about other vCPUs, want at least %d", got, min)
			}
			exactly("affinity_self", affOn, n)
			// A target_cpu / target_affinity that matches no core:
			// INVALID_PARAMETERS (§5.6.2, §5.7).
			exactly("affinity_nocpu", psciInvalidParams, n)
			exactly("cpu_on_nocpu", psciInvalidParams, n)
			// An entry point outside RAM or misaligned, target the caller
			// (ON). mvm checks the entry point before the target's state:
			// INVALID_ADDRESS (§5.6.2). KVM does not check entry points at
			// all (kvm_psci_vcpu_on; the spec requires INVALID_ADDRESS only
			// for an address the implementation knows is invalid), so the
			// target's state decides: ALREADY_ON.
			bad := psciInvalidAddr
			if c.mode == "kernel" {
				bad = psciAlreadyOn
			}
			exactly("cpu_on_outside", bad, n)
			exactly("cpu_on_misaligned", bad, n)
			// Unimplemented function IDs: NOT_SUPPORTED (SMCCC §5.2).
			exactly("unknown_hvc", psciNotSupported, n)
			exactly("unknown_smc", psciNotSupported, n)

			// mvm's own account.
			s := r.summary
			if s.Exit != runsummary.ExitPowerOff || s.Unmapped != 0 {
				t.Errorf("result: exit %q, %d unmapped accesses; want %q, 0", s.Exit, s.Unmapped, runsummary.ExitPowerOff)
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if c.mode == "kernel" {
				// KVM answers every call; mvm sees none of them.
				if s.UnknownSMCCC != 0 || s.PSCIRejectedCalls != 0 || r.stderr != "" {
					t.Errorf("unknown_smccc_calls %d, psci_rejected_calls %d (want 0, 0), stderr:\n%s", s.UnknownSMCCC, s.PSCIRejectedCalls, r.stderr)
				}
			} else {
				if s.UnknownSMCCC != uint64(2*n) {
					t.Errorf("unknown_smccc_calls %d, want %d (an HVC and an SMC per vCPU and round)", s.UnknownSMCCC, 2*n)
				}
				// The guest's own counts of the refusals it saw, by
				// mvm's keys: AFFINITY_INFO and CPU_ON of the MPIDR
				// no vCPU has, CPU_ON with bad entry points; plus
				// the boot vCPU's one AFFINITY_INFO that finds the
				// end of the vCPUs (how it counts them).
				wantRejected := []runsummary.PSCIRejection{
					{Function: "AFFINITY_INFO", Result: "INVALID_PARAMETERS", Count: uint64(r.results["affinity_nocpu"][psciInvalidParams] + 1)},
					{Function: "CPU_ON", Result: "INVALID_ADDRESS", Count: uint64(r.results["cpu_on_outside"][psciInvalidAddr] + r.results["cpu_on_misaligned"][psciInvalidAddr])},
					{Function: "CPU_ON", Result: "INVALID_PARAMETERS", Count: uint64(r.results["cpu_on_nocpu"][psciInvalidParams])},
				}
				if s.PSCIRejectedCalls != uint64(4*n+1) || !slices.Equal(s.PSCIRejected, wantRejected) {
					t.Errorf("psci_rejected_calls %d, psci_rejected %+v; want %d, %+v", s.PSCIRejectedCalls, s.PSCIRejected, 4*n+1, wantRejected)
				}
				logged, further, rejected := 0, 0, 0
				for _, l := range lines {
					switch {
					case strings.Contains(l, "guest made an SMCCC call mvm does not implement"):
						logged++
					case strings.Contains(l, "further ones are counted"):
						further++
					case strings.Contains(l, "guest made a PSCI call with invalid arguments"):
						rejected++
					default:
						t.Errorf("unexpected stderr line: %s", l)
					}
				}
				// 20 distinct IDs race to be logged.
				// CPU_ON's two results at warn; AFFINITY_INFO's
				// (the vCPU count's idiom) at info, not shown.
				if logged != 16 || further != 1 || rejected != 2 {
					t.Errorf("%d function IDs, %d 'further ones' and %d refused-call lines logged, want 16, 1 and 2", logged, further, rejected)
				}
			}
			// Threads and fds: a leak per CPU_ON/CPU_OFF cycle would
			// show a thousand times over. Every vCPU thread exists from
			// the start, and fds must not move. The Go runtime starts
			// threads of its own (an M for a P handed off while a vCPU
			// thread sits in KVM_RUN or ioctls) and never ends them;
			// their number follows how many vCPUs block at once, not the
			// starts: at 64 vCPUs up to 10 over the storm in a quiet lab,
			// 35 with two other labs on the host. It is bounded by the
			// Ps (GOMAXPROCS, vCPUs + 2: an M for each P handed off)
			// plus a few of the runtime's own; a leak per cycle would
			// pass that bound within the first hundred of the ~1000
			// starts.
			e, l := r.early, r.late
			if e.fds == 0 || l.fds == 0 || l.fds > e.fds {
				t.Errorf("fds %d -> %d over %d starts: want no growth", e.fds, l.fds, r.starts)
			}
			if bound := c.cpus + 2 + 4; l.threads > e.threads+bound || r.starts < 5*bound {
				t.Errorf("threads %d -> %d over %d starts: want at most %d more (one per P, and the runtime's own) over at least %d starts", e.threads, l.threads, r.starts, bound, 5*bound)
			}
		})
	}
}
