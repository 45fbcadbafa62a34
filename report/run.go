package report

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	"github.com/mvm-dev/mvm/exits"
	"github.com/mvm-dev/mvm/runsummary"
)

// The run report's geometry, in SVG user units: every figure is 1000 wide
// and scales with the page.
const (
	figW    = 1000.0
	labelW  = 130.0 // left column: row labels
	valueW  = 120.0 // right column: values
	plotX0  = labelW
	plotX1  = figW - valueW
	axisGap = 34.0 // room below a plot for its axis
)

type fact struct{ Name, Value string }

type runView struct {
	Title    string
	Subtitle string
	Source   string
	Config   []fact
	Host     []fact
	Outcome  []fact
	Phases   phaseChart
	VCPUs    vcpuChart
	Heat     *heatChart
	Profile  []profileChart
	Unused   []fact // profile sources not used, with why
	Stats    []fact
	ByPhase  []phaseExits
	Code     []codeReason
	CodeNote string
	NoProf   bool
}

type phaseChart struct {
	H     float64
	Axis  axis
	Bands []band
	Marks []vmark
	Table []phaseRow
}

type band struct {
	Name       string
	Y, X, W, H float64
	LabelY     float64
	StartNS    float64
	EndNS      float64
	DurationNS float64
	Duration   string
	Title      string
	Class      string
	ValueX     float64
}

type vmark struct {
	X, Y0, Y1 float64
	Label     string
	AtNS      float64
	Title     string
	LabelY    float64
}

type phaseRow struct{ Name, Start, End, Duration string }

type vcpuChart struct {
	H, RowH   float64
	Axis      axis
	Rows      []vcpuRow
	Summary   string
	ShowValue bool
	Empty     string
}

type vcpuRow struct {
	ID                   int
	Y, Mid               float64
	Zebra                bool
	Label                string
	OnX, ResetX, EnterX  float64
	HasOn, HasReset, Has bool
	Boot                 bool
	OnNS, ResetNS, InNS  int64
	Value                string
	Title                string
}

type heatChart struct {
	H, RowH  float64
	Axis     axis
	Cells    []heatCell
	Labels   []rowLabel
	Legend   []legendItem
	BucketNS int64
	Bucket   string
	Max      uint64
	Total    uint64
}

type heatCell struct {
	X, Y, W, H float64
	Fill       string
	VCPU       int
	Bucket     int
	Count      uint64
	Title      string
}

type rowLabel struct {
	Y     float64
	Label string
}

type legendItem struct {
	X     float64
	Fill  string
	Label string
}

type profileChart struct {
	Source   string
	Title    string
	Note     string
	H        float64
	Rows     []profileBar
	CountMax uint64
	TimeMax  uint64
}

type profileBar struct {
	Reason        string
	Parent        string // the reason a breakdown row belongs to
	Y             float64
	Indent        bool
	CountW, TimeW float64
	Count         uint64
	TimeNS        uint64
	CountLabel    string
	TimeLabel     string
	Title         string
}

// Profile bar columns.
const (
	profLabelW = 220.0
	profCountX = 230.0
	profCountW = 330.0
	profTimeX  = 640.0
	profTimeW  = 250.0
	profRowH   = 18.0
)

func newRunView(s *runsummary.Summary, source string) runView {
	v := runView{Title: "mvm run report", Source: source}
	kernel := "?"
	if s.Config != nil {
		kernel = filepath.Base(s.Config.Kernel)
	}
	v.Subtitle = fmt.Sprintf("%s on %d vCPU%s, PSCI %s, exit %s", kernel, s.CPUs, plural(s.CPUs), orDash(string(s.PSCI)), orDash(string(s.Exit)))
	if c := s.Config; c != nil {
		v.Config = []fact{{"kernel", c.Kernel}}
		if c.KernelFormat != "" {
			v.Config = append(v.Config, fact{"kernel format", c.KernelFormat})
		}
		if c.KernelTree != "" {
			v.Config = append(v.Config, fact{"kernel build tree", c.KernelTree})
		}
		if c.Initrd != "" {
			v.Config = append(v.Config, fact{"initrd", c.Initrd})
		}
		v.Config = append(v.Config,
			fact{"command line", orDash(c.Cmdline)},
			fact{"vCPUs", strconv.Itoa(c.CPUs)},
			fact{"memory", bytesIEC(c.Memory)},
			fact{"PSCI", fmt.Sprintf("%s asked, %s used", orDash(string(c.PSCI)), orDash(string(s.PSCI)))},
			fact{"profile", map[bool]string{true: "on (--profile)", false: "off"}[c.Profile]})
	} else {
		v.Config = []fact{{"configuration", "not in this result (written by an older mvm)"}, {"vCPUs", strconv.Itoa(s.CPUs)}}
	}
	if h := s.Host; h != nil {
		v.Host = []fact{{"host", orDash(h.Hostname)}, {"system", fmt.Sprintf("%s/%s, Linux %s", h.OS, h.Arch, orDash(h.Kernel))}, {"CPUs", strconv.Itoa(h.CPUs)}}
	} else {
		v.Host = []fact{{"host", "not in this result"}}
	}
	v.Outcome = []fact{{"exit", orDash(string(s.Exit))}}
	if s.Error != "" {
		v.Outcome = append(v.Outcome, fact{"error", s.Error})
	}
	if s.Reboots > 0 {
		v.Outcome = append(v.Outcome, fact{"reboots", strconv.Itoa(s.Reboots) + " (the timeline is the last boot's)"})
	}
	if t, ok := s.PhasesNS[runsummary.PhaseTotal]; ok {
		v.Outcome = append(v.Outcome, fact{"total", ms(float64(t))})
	}
	v.Outcome = append(v.Outcome,
		fact{"mvm RSS", bytesIEC(s.Memory.RSS)},
		fact{"overhead", fmt.Sprintf("%s (RSS minus guest RAM), %s private", bytesIEC(s.Memory.Overhead), bytesIEC(s.Memory.PrivateOverhead))})
	if s.Unmapped > 0 {
		v.Outcome = append(v.Outcome, fact{"unmapped accesses", count(s.Unmapped)})
	}
	if s.PSCIRejectedCalls > 0 {
		v.Outcome = append(v.Outcome, fact{"PSCI calls refused for their arguments", count(s.PSCIRejectedCalls)})
	}
	v.Phases = newPhaseChart(s)
	v.VCPUs = newVCPUChart(s)
	v.Heat = newHeatChart(s.ExitHeat)
	if s.Profile == nil {
		v.NoProf = true
	} else {
		v.Profile, v.Unused = newProfileCharts(s.Profile)
		v.Stats = statFacts(s.Profile)
		v.ByPhase = phaseExitsOf(s.Profile)
		v.Code, v.CodeNote = guestCodeOf(s.Profile)
	}
	return v
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newPhaseChart(s *runsummary.Summary) phaseChart {
	// Where each phase starts comes from the moments its duration was
	// computed from (runsummary.Moments) (-1: not placed, a table row only).
	mo := s.Moments()
	start := func(name string) float64 { return float64(mo.PhaseStart(name)) }
	names := slices.Collect(maps.Keys(s.PhasesNS))
	runsummary.SortPhases(names)
	hi := float64(mo.End)
	for _, n := range names {
		if st := start(n); st >= 0 {
			hi = max(hi, st+float64(s.PhasesNS[n]))
		}
	}
	var c phaseChart
	const rowH, top = 24.0, 28.0
	placed := 0
	for _, n := range names {
		if start(n) >= 0 && s.PhasesNS[n] >= 0 {
			placed++
		}
	}
	bottom := top + float64(placed)*rowH
	ax, sc := timeAxis(0, max(hi, 1), plotX0, plotX1, bottom+4, top-6, 10, "time since VMM start")
	c.Axis = ax
	c.H = bottom + axisGap
	y := top
	for _, n := range names {
		d := float64(s.PhasesNS[n])
		st := start(n)
		row := phaseRow{Name: n, Duration: ms(d), Start: "-", End: "-"}
		if st >= 0 && d >= 0 {
			row.Start, row.End = ms(st), ms(st+d)
			x0, x1 := sc.at(st), sc.at(st+d)
			c.Bands = append(c.Bands, band{
				Name: n, Y: y + 4, X: x0, W: max(x1-x0, 1.5), H: rowH - 8, LabelY: y + rowH/2 + 4,
				StartNS: st, EndNS: st + d, DurationNS: d, Duration: ms(d), ValueX: plotX1 + 6,
				Title: fmt.Sprintf("%s: %s, from %s to %s", n, ms(d), ms(st), ms(st+d)),
				Class: "phase-" + n,
			})
			y += rowH
		}
		c.Table = append(c.Table, row)
	}
	addMark := func(label string, at float64, title string) {
		if at < 0 || len(c.Marks) >= 40 {
			return
		}
		c.Marks = append(c.Marks, vmark{X: sc.at(at), Y0: top - 6, Y1: bottom, Label: label, AtNS: at, Title: title, LabelY: top - 10})
	}
	for _, mk := range s.MarksNS {
		addMark(fmt.Sprintf("%#x", mk.Code), float64(mk.AtNS), fmt.Sprintf("boot marker %#x written at %s", mk.Code, ms(float64(mk.AtNS))))
	}
	var cnames []string
	for k := range s.ConsoleNS {
		cnames = append(cnames, k)
	}
	sort.Strings(cnames)
	for _, k := range cnames {
		at := float64(s.ConsoleNS[k])
		addMark(k, at, fmt.Sprintf("console marker %q matched at %s", k, ms(at)))
	}
	// Labels of marks closer than a label's width would overlap: stagger.
	slices.SortFunc(c.Marks, func(a, b vmark) int { return cmp.Compare(a.X, b.X) })
	for i := 1; i < len(c.Marks); i++ {
		if c.Marks[i].X-c.Marks[i-1].X < 40 && c.Marks[i-1].LabelY == top-10 {
			c.Marks[i].LabelY = top - 20
		}
	}
	return c
}

func newVCPUChart(s *runsummary.Summary) vcpuChart {
	var c vcpuChart
	n := s.CPUs
	if n == 0 {
		c.Empty = "no vCPUs in this result"
		return c
	}
	c.RowH = math.Max(5, math.Min(16, 640/float64(n)))
	c.ShowValue = c.RowH >= 10
	const top = 8.0
	reset := func(i int) int64 {
		if i < len(s.ResetNS) {
			return s.ResetNS[i]
		}
		return -1
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := 0; i < n; i++ {
		for _, v := range []int64{s.CPUOnNS[i], reset(i), s.EnteredNS[i]} {
			if v >= 0 {
				lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
			}
		}
	}
	if math.IsInf(lo, 0) {
		c.Empty = "no vCPU entered the guest"
		lo, hi = 0, 1
	}
	pad := math.Max((hi-lo)*0.02, 1000)
	bottom := top + float64(n)*c.RowH
	ax, sc := timeAxis(lo-pad, hi+pad, plotX0, plotX1, bottom+4, top, 10, "time since VMM start")
	c.Axis = ax
	c.H = bottom + axisGap
	labelEvery := 1
	if c.RowH < 10 {
		labelEvery = 8
	}
	var lat []float64
	for i := 0; i < n; i++ {
		on, rs, in := s.CPUOnNS[i], reset(i), s.EnteredNS[i]
		y := top + float64(i)*c.RowH
		r := vcpuRow{ID: i, Y: y, Mid: y + c.RowH/2, Zebra: i%2 == 1, OnNS: on, ResetNS: rs, InNS: in, Boot: i == 0}
		if i%labelEvery == 0 || i == n-1 {
			r.Label = "vCPU " + strconv.Itoa(i)
		}
		r.HasOn, r.HasReset, r.Has = on >= 0 && i > 0, rs >= 0 && i > 0, in >= 0
		r.OnX, r.ResetX, r.EnterX = sc.at(float64(on)), sc.at(float64(rs)), sc.at(float64(in))
		switch {
		case i == 0 && in >= 0:
			r.Title = fmt.Sprintf("vCPU 0 (boot CPU): first guest entry %s", ms(float64(in)))
		case r.HasOn && r.Has:
			d := float64(in - on)
			lat = append(lat, d)
			r.Value = fmt.Sprintf("%.1f µs", d/1e3)
			r.Title = fmt.Sprintf("vCPU %d: CPU_ON %s", i, ms(float64(on)))
			if r.HasReset {
				r.Title += ", reset " + ms(float64(rs))
			}
			r.Title += fmt.Sprintf(", first entry %s (CPU_ON to entry %s)", ms(float64(in)), ms(d))
		case r.Has:
			r.Title = fmt.Sprintf("vCPU %d: first guest entry %s (CPU_ON not seen by mvm: PSCI in KVM)", i, ms(float64(in)))
		default:
			r.Title = fmt.Sprintf("vCPU %d: never entered the guest", i)
		}
		c.Rows = append(c.Rows, r)
	}
	if len(lat) > 0 {
		sort.Float64s(lat)
		c.Summary = fmt.Sprintf("CPU_ON to first guest entry over %d secondaries: median %s, p90 %s, max %s",
			len(lat), ms(pct(lat, 0.5)), ms(pct(lat, 0.9)), ms(lat[len(lat)-1]))
	}
	return c
}

// pct is the q-quantile of sorted xs (nearest rank).
func pct(xs []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

func newHeatChart(h *runsummary.ExitHeat) *heatChart {
	if h == nil || h.BucketNS <= 0 || len(h.Counts) == 0 {
		return nil
	}
	c := &heatChart{BucketNS: h.BucketNS, Bucket: ms(float64(h.BucketNS))}
	n := len(h.Counts)
	// The map spans the buckets from the first with an exit to the last:
	// nothing exits before the first KVM_RUN.
	nb, first := 0, math.MaxInt
	for _, row := range h.Counts {
		nb = max(nb, len(row))
		for b, v := range row {
			c.Max = max(c.Max, v)
			c.Total += v
			if v > 0 {
				first = min(first, b)
			}
		}
	}
	if nb == 0 || c.Total == 0 {
		return nil
	}
	c.RowH = math.Max(5, math.Min(16, 640/float64(n)))
	const top = 8.0
	bottom := top + float64(n)*c.RowH
	from, span := float64(first)*float64(h.BucketNS), float64(nb)*float64(h.BucketNS)
	ax, sc := timeAxis(from, span, plotX0, plotX1, bottom+4, top, 10, "time since VMM start")
	c.Axis = ax
	c.H = bottom + axisGap + 30
	w := sc.at(float64(h.BucketNS)) - sc.at(0)
	logMax := math.Log1p(float64(c.Max))
	labelEvery := 1
	if c.RowH < 10 {
		labelEvery = 8
	}
	for i, row := range h.Counts {
		y := top + float64(i)*c.RowH
		if i%labelEvery == 0 || i == n-1 {
			c.Labels = append(c.Labels, rowLabel{Y: y + c.RowH/2 + 3, Label: "vCPU " + strconv.Itoa(i)})
		}
		for b, v := range row {
			if v == 0 {
				continue
			}
			from := float64(b) * float64(h.BucketNS)
			c.Cells = append(c.Cells, heatCell{
				X: sc.at(from), Y: y, W: w, H: c.RowH, VCPU: i, Bucket: b, Count: v,
				Fill:  heatColor(math.Log1p(float64(v)) / logMax),
				Title: fmt.Sprintf("vCPU %d, %s to %s: %s exits", i, ms(from), ms(from+float64(h.BucketNS)), count(v)),
			})
		}
	}
	// Legend: six steps of the log scale with the counts they stand for.
	for k := 0; k < 6; k++ {
		f := float64(k+1) / 6
		v := math.Expm1(f * logMax)
		c.Legend = append(c.Legend, legendItem{X: plotX0 + float64(k)*90, Fill: heatColor(f), Label: "≤ " + count(uint64(math.Round(v)))})
	}
	return c
}

// sourceTitle names a profile source for a heading.
func sourceTitle(src string) string {
	switch src {
	case exits.SourceUserspace:
		return "Exits that reached mvm (KVM_RUN returns)"
	case exits.SourceTracepoint:
		return "All exits (kvm:kvm_exit tracepoint, as perf kvm stat counts them)"
	}
	return src
}

func newProfileCharts(p *exits.Report) ([]profileChart, []fact) {
	var charts []profileChart
	var unused []fact
	for _, st := range p.Sources {
		if !st.Used {
			unused = append(unused, fact{st.Name, orDash(st.Reason)})
			continue
		}
		if st.Name == exits.SourceKVMStats {
			continue
		}
		var rows []exits.Row
		for _, r := range p.Rows {
			if r.Source == st.Name && r.VCPU == exits.TotalVCPU {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			continue
		}
		slices.SortStableFunc(rows, func(a, b exits.Row) int { return cmp.Compare(b.Count, a.Count) })
		ch := profileChart{Source: st.Name, Title: sourceTitle(st.Name), Note: st.Detail}
		if st.Name == exits.SourceTracepoint && p.PerfTime != "" {
			ch.Note += "; time is " + p.PerfTime + " time (docs/profile.md)"
		}
		var total uint64
		for _, r := range rows {
			ch.CountMax = max(ch.CountMax, r.Count)
			ch.TimeMax = max(ch.TimeMax, r.TimeNS)
			total += r.Count
		}
		y := 22.0
		for _, r := range rows {
			b := profileBar{Reason: r.Reason, Y: y, Count: r.Count, TimeNS: r.TimeNS,
				CountLabel: count(r.Count), TimeLabel: ms(float64(r.TimeNS))}
			if ch.CountMax > 0 {
				b.CountW = math.Max(profCountW*float64(r.Count)/float64(ch.CountMax), 0.5)
			}
			if ch.TimeMax > 0 {
				b.TimeW = math.Max(profTimeW*float64(r.TimeNS)/float64(ch.TimeMax), 0.5)
			}
			b.Title = fmt.Sprintf("%s: %s exits (%.1f%%), time %s, mean %s, handling %s", r.Reason, count(r.Count),
				100*float64(r.Count)/math.Max(float64(total), 1), ms(float64(r.TimeNS)), ms(float64(r.TimeMeanNS)), ms(float64(r.HandleNS)))
			b.Title += latencyText(r.Percentiles)
			ch.Rows = append(ch.Rows, b)
			y += profRowH
			// The breakdown rows under their reason, on the same scale,
			// so that they visibly add up to it.
			parts := slices.Clone(r.Breakdown)
			slices.SortStableFunc(parts, func(a, b exits.BreakdownRow) int { return cmp.Compare(b.Samples, a.Samples) })
			for _, part := range parts {
				pb := profileBar{Reason: part.Key, Parent: r.Reason, Indent: true, Y: y, Count: part.Samples, TimeNS: part.TimeNS,
					CountLabel: count(part.Samples), TimeLabel: ms(float64(part.TimeNS))}
				if ch.CountMax > 0 {
					pb.CountW = math.Max(profCountW*float64(part.Samples)/float64(ch.CountMax), 0.5)
				}
				if ch.TimeMax > 0 {
					pb.TimeW = math.Max(profTimeW*float64(part.TimeNS)/float64(ch.TimeMax), 0.5)
				}
				pb.Title = fmt.Sprintf("%s / %s: %s exits (%.1f%% of %s), time %s, handling %s", r.Reason, part.Key, count(part.Samples),
					100*float64(part.Samples)/math.Max(float64(r.Count), 1), r.Reason, ms(float64(part.TimeNS)), ms(float64(part.HandleNS)))
				pb.Title += latencyText(part.Percentiles)
				ch.Rows = append(ch.Rows, pb)
				y += profRowH
			}
		}
		ch.H = y + 8
		charts = append(charts, ch)
	}
	return charts, unused
}

// statFacts lists the KVM statistics summed over the vCPUs that moved.
func statFacts(p *exits.Report) []fact {
	var out []fact
	for _, r := range p.KVMStats {
		if r.VCPU == exits.TotalVCPU && r.Delta > 0 {
			out = append(out, fact{r.Name, r.Pretty})
		}
	}
	slices.SortFunc(out, func(a, b fact) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// latencyText renders a row's percentiles for its tooltip.
func latencyText(l *exits.Latency) string {
	if l == nil {
		return ""
	}
	p := func(x exits.Percentiles) string {
		return fmt.Sprintf("p50 %s, p90 %s, p99 %s, max %s", ms(float64(x.P50)), ms(float64(x.P90)), ms(float64(x.P99)), ms(float64(x.Max)))
	}
	return "; guest time " + p(l.Guest) + "; handling " + p(l.Handle)
}

// phaseExits is one boot phase's tracepoint exits, most frequent first.
type phaseExits struct {
	Phase, Span string
	Total       uint64
	Rows        []fact
}

func phaseExitsOf(p *exits.Report) []phaseExits {
	var out []phaseExits
	for _, ph := range p.ByPhase {
		rows := slices.Clone(ph.Rows)
		slices.SortStableFunc(rows, func(a, b exits.PhaseRow) int { return cmp.Compare(b.Samples, a.Samples) })
		pe := phaseExits{Phase: ph.Phase, Span: ms(float64(ph.StartNS)) + " to "}
		if ph.EndNS < 0 {
			pe.Span += "the end"
		} else {
			pe.Span += ms(float64(ph.EndNS))
		}
		for _, r := range rows {
			pe.Total += r.Samples
			pe.Rows = append(pe.Rows, fact{r.Reason, fmt.Sprintf("%s exits, %s", count(r.Samples), ms(float64(r.TimeNS)))})
		}
		out = append(out, pe)
	}
	return out
}

// codeReason is where in the guest one reason's exits came from.
type codeReason struct {
	Reason string
	Funcs  []fact
}

func guestCodeOf(p *exits.Report) ([]codeReason, string) {
	g := p.GuestCode
	if g == nil {
		return nil, ""
	}
	note := "guest PCs as raw addresses (no --guest-symbols)"
	if g.Symbols != "" {
		note = "symbols from " + g.Symbols
		if g.KASLROffset != "" {
			note += ", KASLR offset " + g.KASLROffset + " (" + g.KASLRFrom + ")"
		}
	}
	if g.Note != "" {
		note += "; " + g.Note
	}
	var out []codeReason
	for _, r := range g.Reasons {
		cr := codeReason{Reason: r.Reason}
		for _, f := range r.Functions {
			v := count(f.Samples) + " exits"
			if f.TopPC != "" {
				v += ", most at " + f.TopPC
			}
			cr.Funcs = append(cr.Funcs, fact{f.Function, v})
		}
		if r.Other > 0 {
			cr.Funcs = append(cr.Funcs, fact{"other", count(r.Other) + " exits"})
		}
		out = append(out, cr)
	}
	return out, note
}
