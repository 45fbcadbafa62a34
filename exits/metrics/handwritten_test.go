package metrics

import (
	"bufio"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// refWriteText is the text exposition writer mvm used before it served
// metrics through client_golang (commit 45a03a3, exits/metrics/expose.go),
// kept here unchanged as the reference the library's output is compared
// with: the same families, help, types, labels and values
// (TestSameAsHandWritten, FuzzSameAsHandWritten).
func refWriteText(w io.Writer, fams []Family) error {
	bw := bufio.NewWriter(w)
	var line []byte
	for _, f := range fams {
		if len(f.Series) == 0 {
			continue
		}
		line = append(line[:0], "# HELP "...)
		line = append(line, f.Name...)
		line = append(line, ' ')
		line = refAppendEscaped(line, f.Help, false)
		line = append(line, "\n# TYPE "...)
		line = append(line, f.Name...)
		line = append(line, ' ')
		line = append(line, f.Kind.String()...)
		line = append(line, '\n')
		for _, s := range f.Series {
			if f.Kind != Histogram {
				line = refAppendSample(line, f.Name, s.Labels, nil, s.Value)
				continue
			}
			for _, b := range s.Buckets {
				line = refAppendSample(line, f.Name+"_bucket", s.Labels, &Label{"le", refFormatFloat(b.UpperBound)}, float64(b.Count))
			}
			line = refAppendSample(line, f.Name+"_bucket", s.Labels, &Label{"le", "+Inf"}, float64(s.Count))
			line = refAppendSample(line, f.Name+"_sum", s.Labels, nil, s.Sum)
			line = refAppendSample(line, f.Name+"_count", s.Labels, nil, float64(s.Count))
		}
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func refAppendSample(b []byte, name string, labels []Label, extra *Label, v float64) []byte {
	b = append(b, name...)
	if len(labels) > 0 || extra != nil {
		b = append(b, '{')
		for i, l := range labels {
			if i > 0 {
				b = append(b, ',')
			}
			b = refAppendLabel(b, l)
		}
		if extra != nil {
			if len(labels) > 0 {
				b = append(b, ',')
			}
			b = refAppendLabel(b, *extra)
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = append(b, refFormatFloat(v)...)
	return append(b, '\n')
}

func refAppendLabel(b []byte, l Label) []byte {
	b = append(b, l.Name...)
	b = append(b, '=', '"')
	b = refAppendEscaped(b, l.Value, true)
	return append(b, '"')
}

func refAppendEscaped(b []byte, s string, quote bool) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, '\\', '\\')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '"' && quote:
			b = append(b, '\\', '"')
		default:
			b = append(b, c)
		}
	}
	return b
}

func refFormatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
