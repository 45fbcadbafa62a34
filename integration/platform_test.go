//go:build linux && arm64

package integration

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/guest"
)

// platformCmd is the /mvm-cmd of the platform test guest: it reports the
// guest's clock and the kernel lines of the RTC, sets an RTC alarm and
// counts its interrupt, then moves the guest's RTC and reads it back.
const platformCmd = `#!/bin/busybox sh
echo "mvm-guest: date $(date +%s)"
dmesg | grep -m1 'hw perfevents' | sed 's/^.*hw perfevents/mvm-guest: hw perfevents/'
dmesg | grep -m1 'rtc-pl031.*setting system clock' | sed 's/^.*rtc-pl031/mvm-guest: rtc-pl031/'
for d in /sys/bus/amba/devices/*; do echo "mvm-guest: amba $(basename $d) id $(cat $d/id)"; done
irqs() { awk '/rtc-pl031/ { n = 0; for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) n += $i; print n }' /proc/interrupts; }
echo "mvm-guest: rtc irqs before $(irqs)"
echo +2 > /sys/class/rtc/rtc0/wakealarm
sleep 3
echo "mvm-guest: rtc irqs after $(irqs)"
date -u -s @1000000000 >/dev/null && hwclock -w -u && echo "mvm-guest: hwclock $(hwclock -r -u)"
`

func platformInitrd(t *testing.T) string {
	t.Helper()
	a := guest.NewInitramfs()
	if err := a.AddHostFile("bin/busybox", env(t, "MVM_BUSYBOX")); err != nil {
		t.Fatal(err)
	}
	if err := a.AddFile("init", []byte(guest.TestInit), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := a.AddFile("mvm-cmd", []byte(platformCmd), 0o755); err != nil {
		t.Fatal(err)
	}
	blob, err := a.Gzip()
	if err != nil {
		t.Fatal(err)
	}
	return saveInitrd(t, blob)
}

var (
	guestDateRe = regexp.MustCompile(`mvm-guest: date (\d+)`)
	rtcHCToSys  = regexp.MustCompile(`mvm-guest: rtc-pl031 [0-9a-f]+\.rtc: setting system clock to \S+ UTC \((\d+)\)`)
	rtcIRQsRe   = regexp.MustCompile(`mvm-guest: rtc irqs (before|after) (\d+)`)
	amba031Re   = regexp.MustCompile(`mvm-guest: amba [0-9a-f]+\.rtc id ([0-9a-f]+)`)
	hwclockRe   = regexp.MustCompile(`mvm-guest: hwclock .*2001`)
	perfRe      = regexp.MustCompile(`mvm-guest: hw perfevents: enabled with armv8_pmuv3\S* PMU driver, (\d+) `)
)

// TestLinuxPlatform boots Linux once, on 2 vCPUs with --pmu, and checks the
// platform devices the guest sees: the PL031 sets the guest's clock at boot
// to the host's (the lab machine's, which QEMU's own PL031 set from the real
// host's UTC), its alarm interrupt arrives, and the guest can set its RTC;
// the PMU driver probes, and the second vCPU (re-initialised by mvm for its
// CPU_ON with PSCI in userspace) comes up with its PMU.
func TestLinuxPlatform(t *testing.T) {
	kernel := env(t, "MVM_LINUX")
	initrd := platformInitrd(t)
	before := time.Now().Unix()
	r := mvm(t, 4*time.Minute, "run", "--kernel", kernel, "--initrd", initrd,
		"--cpus", "2", "--memory", "256M", "--pmu", "--append", "quiet "+noCryptoTests)
	after := time.Now().Unix()
	if r.code != 0 {
		t.Fatalf("exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "mvm-guest: ") {
			t.Log(l)
		}
	}
	t.Logf("host clock during the run: %d..%d", before, after)
	within := func(what string, v int64) {
		t.Helper()
		if v < before-60 || v > after+60 {
			t.Errorf("%s = %d (%v), more than a minute away from the host's %d..%d", what, v, time.Unix(v, 0).UTC(), before, after)
		}
	}

	if m := nprocRe.FindStringSubmatch(r.stdout); m == nil || m[1] != "2" {
		t.Errorf("guest nproc = %v, want 2", m)
	}
	if p := perfRe.FindStringSubmatch(r.stdout); p == nil {
		t.Errorf("no 'hw perfevents: enabled with armv8_pmuv3' line in the guest's dmesg with --pmu")
	} else if n, _ := strconv.Atoi(p[1]); n < 2 {
		t.Errorf("the guest PMU has %d counters, want the cycle counter and at least one event counter", n)
	}

	m := guestDateRe.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Errorf("the guest printed no date:\n%s", r.stdout)
	} else {
		d, _ := strconv.ParseInt(m[1], 10, 64)
		within("the guest's date", d)
	}
	if h := rtcHCToSys.FindStringSubmatch(r.stdout); h == nil {
		t.Errorf("no 'rtc-pl031 ... setting system clock' line in the guest's dmesg:\n%s", r.stdout)
	} else {
		s, _ := strconv.ParseInt(h[1], 10, 64)
		within("the time rtc-pl031 set at boot", s)
	}

	// The peripheral id Linux's AMBA bus read from PeriphID0-3 (sysfs
	// prints it as %08x): part 0x031, designer 0x41 (ARM), revision 1 in
	// bits 23:20 (PL031 TRM 3.3.9; QEMU's PL031 reads the same).
	if m := amba031Re.FindStringSubmatch(r.stdout); m == nil {
		t.Errorf("no AMBA device for the PL031 in the guest's /sys/bus/amba/devices:\n%s", r.stdout)
	} else if m[1] != "00141031" {
		t.Errorf("the guest read the PL031's peripheral id as %s, want 00141031", m[1])
	}

	irqs := map[string]int{}
	for _, m := range rtcIRQsRe.FindAllStringSubmatch(r.stdout, -1) {
		irqs[m[1]], _ = strconv.Atoi(m[2])
	}
	if len(irqs) != 2 || irqs["after"] != irqs["before"]+1 {
		t.Errorf("RTC alarm interrupts before/after a 2 s wakealarm: %v, want one more after\n%s", irqs, r.stdout)
	}
	if !hwclockRe.MatchString(r.stdout) {
		t.Errorf("hwclock -w then -r did not read back the 2001 the guest set:\n%s", r.stdout)
	}
	// The guest's LR write moved its own RTC only.
	if now := time.Now().Unix(); now < after {
		t.Errorf("the host's clock moved back with the guest's RTC: now %d, before the run ended at %d", now, after)
	}
}

var (
	pmuLineRe = regexp.MustCompile(`(?m)^pmu cpu (\d+) pmuver (\d+) pmcr (undef|0x[0-9a-f]+ n (\d+) cycles (\d+) (\d+))$`)
)

// TestPMUPayload runs the bare-metal PMU payload on 2 vCPUs (the second
// started by CPU_ON, so after mvm's KVM_ARM_VCPU_INIT of it, or KVM's own
// reset with --psci kernel) with and without --pmu. With it, ID_AA64DFR0_EL1 shows a PMUv3 and the cycle
// counter counts on both vCPUs. Without it KVM hides the PMU: PMUVer reads
// 0 and a PMCR_EL0 access is UNDEFINED (KVM injects an undefined
// instruction exception for a PMU register of a vCPU without the PMU
// feature).
func TestPMUPayload(t *testing.T) {
	// mvm caps reports the guest PMU, which --pmu needs and the lab has.
	c := mvm(t, 30*time.Second, "caps", "--json")
	var caps struct {
		Items []struct {
			Name      string `json:"name"`
			Available bool   `json:"available"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal([]byte(c.stdout), &caps); c.code != 0 || err != nil {
		t.Fatalf("mvm caps --json: exit %d, %v\n%s", c.code, err, c.stdout)
	}
	found := false
	for _, it := range caps.Items {
		if it.Name == "guest PMU (PMUv3)" {
			found = true
			if !it.Available {
				t.Fatalf("mvm caps: this host has no guest PMU, so --pmu cannot be tested here")
			}
		}
	}
	if !found {
		t.Errorf("mvm caps has no guest PMU item:\n%s", c.stdout)
	}

	// With KVM's PSCI too: KVM then resets vCPU 1 for its CPU_ON itself.
	for _, c := range []struct {
		withPMU bool
		psci    string
	}{{true, "user"}, {true, "kernel"}, {false, "user"}} {
		withPMU := c.withPMU
		name := "nopmu"
		args := []string{"run", "--kernel", payload(t, "pmu.bin"), "--cpus", "2", "--memory", "64M", "--psci", c.psci}
		if withPMU {
			args = append(args, "--pmu")
			name = "pmu"
		}
		t.Run(name+"/psci="+c.psci, func(t *testing.T) {
			r := mvm(t, time.Minute, args...)
			if r.code != 0 {
				t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if strings.Contains(r.stdout, "error") || !strings.Contains(r.stdout, "pmu done\n") {
				t.Errorf("payload failed:\n%s", r.stdout)
			}
			lines := pmuLineRe.FindAllStringSubmatch(r.stdout, -1)
			if len(lines) != 2 {
				t.Fatalf("%d vCPU lines, want 2:\n%s", len(lines), r.stdout)
			}
			for i, l := range lines {
				t.Log(l[0])
				if l[1] != strconv.Itoa(i) {
					t.Errorf("line %d is from vCPU %s", i, l[1])
				}
				ver, _ := strconv.Atoi(l[2])
				if !withPMU {
					if ver != 0 || l[3] != "undef" {
						t.Errorf("vCPU %d without --pmu: PMUVer %d, PMCR_EL0 %s; want 0 and an UNDEFINED access", i, ver, l[3])
					}
					continue
				}
				// PMUVer 1 is PMUv3, 4..8 its later versions, 0xf IMPLEMENTATION DEFINED.
				if ver == 0 || ver == 0xf || l[3] == "undef" {
					t.Fatalf("vCPU %d with --pmu: PMUVer %d, PMCR_EL0 %s; want a PMUv3 and a readable PMCR", i, ver, l[3])
				}
				a, _ := strconv.ParseUint(l[5], 10, 64)
				b, _ := strconv.ParseUint(l[6], 10, 64)
				if b <= a {
					t.Errorf("vCPU %d: PMCCNTR_EL0 %d then %d across a busy loop; the cycle counter does not count", i, a, b)
				}
			}
		})
	}
}
