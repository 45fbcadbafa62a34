package report

import (
	"fmt"
	"math"
	"strconv"
)

// linear maps a data interval onto a pixel interval.
type linear struct{ d0, d1, r0, r1 float64 }

func (s linear) at(v float64) float64 {
	if s.d1 == s.d0 {
		return s.r0
	}
	return s.r0 + (v-s.d0)/(s.d1-s.d0)*(s.r1-s.r0)
}

// axis is a horizontal time axis: ticks at "nice" values in nanoseconds.
type axis struct {
	Y      float64 // the axis line's y
	X0, X1 float64
	Ticks  []tick
	Label  string
	Top    float64 // grid lines run from Top to Y
}

type tick struct {
	X     float64
	NS    float64 // the value, for tests and tooltips
	Label string
}

// timeUnit picks the unit in which the largest value of an axis reads
// best, so that tick labels stay short (42.5 ms, not 42500 µs).
func timeUnit(maxNS float64) (string, float64) {
	switch {
	case maxNS >= 10e9:
		return "s", 1e9
	case maxNS >= 1e6:
		return "ms", 1e6
	case maxNS >= 1e3:
		return "µs", 1e3
	}
	return "ns", 1
}

// niceStep is a 1, 2 or 5 times a power of ten near span/n.
func niceStep(span float64, n int) float64 {
	if span <= 0 || n <= 0 || math.IsInf(span, 0) || math.IsNaN(span) {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// timeAxis builds an axis over [lo, hi] ns drawn from x0 to x1 with about
// n ticks, and returns it with the scale.
func timeAxis(lo, hi, x0, x1, y, top float64, n int, what string) (axis, linear) {
	if !(hi > lo) {
		hi = lo + 1
	}
	unit, div := timeUnit(math.Max(math.Abs(lo), math.Abs(hi)))
	step := niceStep((hi-lo)/div, n) * div
	first := math.Ceil(lo/step) * step
	// As many decimals as the step needs: 0.5 ms steps print 41.5.
	decimals := max(0, int(-math.Floor(math.Log10(step/div)+1e-9)))
	s := linear{lo, hi, x0, x1}
	ax := axis{Y: y, X0: x0, X1: x1, Top: top, Label: what + " [" + unit + "]"}
	for k := 0; k < 50; k++ {
		v := first + float64(k)*step
		if v > hi+step*1e-9 {
			break
		}
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		ax.Ticks = append(ax.Ticks, tick{X: s.at(v), NS: v, Label: strconv.FormatFloat(v/div, 'f', decimals, 64)})
	}
	return ax, s
}

// ms is how tooltips and labels print a duration: milliseconds with
// microsecond precision, the same everywhere so that a reader (and the
// tests) can compare any two numbers.
func ms(ns float64) string { return fmt.Sprintf("%.3f ms", ns/1e6) }

// count prints an exit count with thousands separators.
func count(n uint64) string {
	s := strconv.FormatUint(n, 10)
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// bytesIEC prints a byte count in KiB/MiB/GiB.
func bytesIEC(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

// variantColor is the Okabe-Ito palette, distinguishable with the common
// colour-vision deficiencies and in greyscale print by its marker shapes.
func variantColor(i int) string {
	p := [...]string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#F0E442"}
	return p[((i%len(p))+len(p))%len(p)]
}

// heatColor maps 0..1 onto a light-to-dark sequential ramp (yellow to dark
// blue, viridis-like), so that more exits always read darker, also in
// greyscale print.
func heatColor(f float64) string {
	stops := [...][3]float64{{253, 231, 37}, {122, 209, 81}, {34, 168, 132}, {42, 120, 142}, {65, 68, 135}, {68, 1, 84}}
	if !(f > 0) {
		f = 0
	}
	if f > 1 {
		f = 1
	}
	pos := f * float64(len(stops)-1)
	i := int(pos)
	if i >= len(stops)-1 {
		i = len(stops) - 2
	}
	t := pos - float64(i)
	var c [3]int
	for k := range c {
		c[k] = int(math.Round(stops[i][k]*(1-t) + stops[i+1][k]*t))
	}
	return fmt.Sprintf("#%02x%02x%02x", c[0], c[1], c[2])
}

// f1 rounds a coordinate to 0.1 px: the files stay small and no browser
// draws finer.
func f1(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "0"
	}
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
}
