//go:build linux && arm64

package integration

import (
	"os"
	"path/filepath"
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
dmesg | grep -m1 'rtc-pl031.*setting system clock' | sed 's/^.*rtc-pl031/mvm-guest: rtc-pl031/'
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
	p := filepath.Join(t.TempDir(), "initrd.gz")
	if err := os.WriteFile(p, blob, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	guestDateRe = regexp.MustCompile(`mvm-guest: date (\d+)`)
	rtcHCToSys  = regexp.MustCompile(`mvm-guest: rtc-pl031 [0-9a-f]+\.rtc: setting system clock to \S+ UTC \((\d+)\)`)
	rtcIRQsRe   = regexp.MustCompile(`mvm-guest: rtc irqs (before|after) (\d+)`)
	hwclockRe   = regexp.MustCompile(`mvm-guest: hwclock .*2001`)
)

// TestLinuxPlatform boots Linux once and checks the platform devices the
// guest sees: the PL031 sets the guest's clock at boot to the host's (the
// lab machine's, which QEMU's own PL031 set from the real host's UTC), its
// alarm interrupt arrives, and the guest can set its RTC.
func TestLinuxPlatform(t *testing.T) {
	kernel := env(t, "MVM_LINUX")
	initrd := platformInitrd(t)
	before := time.Now().Unix()
	r := mvm(t, 4*time.Minute, "run", "--kernel", kernel, "--initrd", initrd,
		"--cpus", "1", "--memory", "256M", "--append", "quiet")
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
