package vmm

import (
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/runsummary"
)

// t0 is the tests' VMM start; at is a time ms milliseconds after it.
var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func msPhases(p map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range p {
		out[k] = v / int64(time.Millisecond)
	}
	return out
}

// fullTimeline is a 3-vCPU boot with every moment seen: vCPU 2's CPU_ON
// came first, vCPU 2 entered last.
func fullTimeline() Timeline {
	return Timeline{
		Start: t0, FirstRun: at(10),
		CPUs: []CPUTimeline{
			{Entered: at(10)},
			{CPUOn: at(130), Entered: at(135)},
			{CPUOn: at(110), Entered: at(160)},
		},
		UserspaceMark: at(410),
		ConsoleMarks:  map[string]time.Time{runsummary.ConsoleMarkSMP: at(180), "init": at(300)},
		End:           at(500),
	}
}

// Every phase runs between the moments docs/boot-phases.md gives it; one
// whose ends were not both seen, or that would run backwards, is absent.
func TestTimelinePhases(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*Timeline)
		want map[string]int64
	}{
		{"every phase", func(*Timeline) {}, map[string]int64{
			runsummary.PhaseVMMSetup: 10, runsummary.PhaseBootToSMP: 100, runsummary.PhaseSecondaries: 50, runsummary.PhaseSecondariesConsole: 70,
			runsummary.PhaseSMPConsole: 170, "console:init": 290, runsummary.PhaseKernelToUser: 400, runsummary.PhaseTotal: 500}},
		{"one vCPU, quiet, no marker", func(tl *Timeline) {
			tl.CPUs, tl.ConsoleMarks, tl.UserspaceMark = tl.CPUs[:1], nil, time.Time{}
		}, map[string]int64{runsummary.PhaseVMMSetup: 10, runsummary.PhaseTotal: 500}},
		// KVM's PSCI: mvm sees no CPU_ON, but the console line still comes.
		{"PSCI in KVM", func(tl *Timeline) {
			for i := 1; i < len(tl.CPUs); i++ {
				tl.CPUs[i] = CPUTimeline{}
			}
		}, map[string]int64{runsummary.PhaseVMMSetup: 10, runsummary.PhaseSMPConsole: 170, "console:init": 290, runsummary.PhaseKernelToUser: 400, runsummary.PhaseTotal: 500}},
		// A secondary that never came up: no secondaries, but the first
		// CPU_ON still ends boot_to_smp.
		{"a secondary missing", func(tl *Timeline) { tl.CPUs[1] = CPUTimeline{} }, map[string]int64{
			runsummary.PhaseVMMSetup: 10, runsummary.PhaseBootToSMP: 100, runsummary.PhaseSecondariesConsole: 70,
			runsummary.PhaseSMPConsole: 170, "console:init": 290, runsummary.PhaseKernelToUser: 400, runsummary.PhaseTotal: 500}},
		// A console line before the first KVM_RUN (the previous boot's,
		// say) and a user marker before it: not phases.
		{"backwards", func(tl *Timeline) {
			tl.ConsoleMarks["init"], tl.UserspaceMark = at(5), at(8)
		}, map[string]int64{
			runsummary.PhaseVMMSetup: 10, runsummary.PhaseBootToSMP: 100, runsummary.PhaseSecondaries: 50, runsummary.PhaseSecondariesConsole: 70,
			runsummary.PhaseSMPConsole: 170, runsummary.PhaseTotal: 500}},
		{"still running", func(tl *Timeline) { tl.End = time.Time{} }, map[string]int64{
			runsummary.PhaseVMMSetup: 10, runsummary.PhaseBootToSMP: 100, runsummary.PhaseSecondaries: 50, runsummary.PhaseSecondariesConsole: 70,
			runsummary.PhaseSMPConsole: 170, "console:init": 290, runsummary.PhaseKernelToUser: 400}},
	} {
		tl := fullTimeline()
		c.mod(&tl)
		got := map[string]int64{}
		for k, d := range tl.Phases() {
			got[k] = d.Milliseconds()
		}
		if !maps.Equal(got, c.want) {
			t.Errorf("%s: phases (ms) %v, want %v", c.name, got, c.want)
		}
	}
}

// A result file gives the same phases, and the same starts, as the
// timeline it was written from: the report and mvm bench read phases and
// their starts from the one definition.
func TestSummaryMomentsAgree(t *testing.T) {
	tl := fullTimeline()
	s := Result{Timeline: tl}.Summary()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back runsummary.Summary
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	fromTimeline, fromFile := tl.Moments(), back.Moments()
	if got, want := fromFile.Phases(), back.PhasesNS; !maps.Equal(got, want) {
		t.Errorf("phases from the file's moments %v, the file's phases_ns %v", msPhases(got), msPhases(want))
	}
	if got, want := fromFile.Phases(), fromTimeline.Phases(); !maps.Equal(got, want) {
		t.Errorf("phases from the file %v, from the timeline %v", msPhases(got), msPhases(want))
	}
	wantStart := map[string]int{runsummary.PhaseVMMSetup: 0, runsummary.PhaseTotal: 0, runsummary.PhaseBootToSMP: 10, runsummary.PhaseSMPConsole: 10,
		runsummary.PhaseKernelToUser: 10, "console:init": 10, runsummary.PhaseSecondaries: 110, runsummary.PhaseSecondariesConsole: 110}
	for name := range back.PhasesNS {
		w, ok := wantStart[name]
		if !ok {
			t.Errorf("unexpected phase %s", name)
			continue
		}
		if got := fromFile.PhaseStart(name); got != int64(w)*int64(time.Millisecond) {
			t.Errorf("%s starts at %d ns in the file, want %d ms", name, got, w)
		}
		if a, b := fromFile.PhaseStart(name), fromTimeline.PhaseStart(name); a != b {
			t.Errorf("%s starts at %d (file) and %d (timeline)", name, a, b)
		}
	}
	if fromFile.PhaseStart("nope") != -1 || fromFile.PhaseStart("console:never") != -1 {
		t.Errorf("a phase the boot does not have has a start")
	}
}

// Whatever the moments, no phase is negative and each equals its end
// minus its start; the result file's moments give the timeline's phases.
func FuzzPhases(f *testing.F) {
	f.Add(int16(10), int16(130), int16(135), int16(110), int16(160), int16(410), int16(180), int16(300), int16(500))
	f.Add(int16(-1), int16(-1), int16(-1), int16(-1), int16(-1), int16(-1), int16(-1), int16(-1), int16(-1))
	f.Add(int16(50), int16(10), int16(5), int16(40), int16(-1), int16(20), int16(1), int16(-5), int16(30))
	f.Fuzz(func(t *testing.T, first, on1, in1, on2, in2, user, smp, mark, end int16) {
		tm := func(ms int16) time.Time {
			if ms < 0 {
				return time.Time{}
			}
			return at(int(ms))
		}
		tl := Timeline{Start: t0, FirstRun: tm(first),
			CPUs:          []CPUTimeline{{Entered: tm(first)}, {CPUOn: tm(on1), Entered: tm(in1)}, {CPUOn: tm(on2), Entered: tm(in2)}},
			UserspaceMark: tm(user), End: tm(end),
			ConsoleMarks: map[string]time.Time{}}
		if smp >= 0 {
			tl.ConsoleMarks[runsummary.ConsoleMarkSMP] = tm(smp)
		}
		if mark >= 0 {
			tl.ConsoleMarks["m"] = tm(mark)
		}
		m := tl.Moments()
		for name, d := range m.Phases() {
			if d < 0 {
				t.Errorf("%s = %d", name, d)
			}
			if st := m.PhaseStart(name); st < 0 {
				t.Errorf("%s has no start", name)
			}
		}
		s := Result{Timeline: tl}.Summary()
		if got := s.Moments().Phases(); !maps.Equal(got, s.PhasesNS) {
			t.Errorf("file's moments give %v, phases_ns %v", got, s.PhasesNS)
		}
	})
}
