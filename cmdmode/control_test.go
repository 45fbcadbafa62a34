package cmdmode

import (
	"bytes"
	"reflect"
	"testing"
)

// TestParseControl: signals and window sizes in one stream, a size split
// across reads, junk skipped.
func TestParseControl(t *testing.T) {
	stream := append(append([]byte{15, 0, 200}, Resize(50, 132)...), 2)
	want := []Control{{Signal: 15}, {Rows: 50, Cols: 132}, {Signal: 2}}
	if got, rest := ParseControl(stream); !reflect.DeepEqual(got, want) || len(rest) != 0 {
		t.Errorf("ParseControl = %+v rest %v, want %+v", got, rest, want)
	}
	for cut := 1; cut < len(stream); cut++ {
		a, rest := ParseControl(stream[:cut])
		b, rest2 := ParseControl(append(append([]byte{}, rest...), stream[cut:]...))
		if got := append(a, b...); !reflect.DeepEqual(got, want) || len(rest2) != 0 {
			t.Errorf("split at %d: %+v, want %+v", cut, got, want)
		}
	}
}

func FuzzParseControl(f *testing.F) {
	f.Add(append([]byte{9}, Resize(24, 80)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, rest := ParseControl(b)
		if len(rest) >= resizeLen || (len(rest) > 0 && rest[0] != ResizeByte) || !bytes.HasSuffix(b, rest) {
			t.Fatalf("rest %v of %v", rest, b)
		}
		for _, m := range msgs {
			if m.Signal < 0 || m.Signal > maxSignalNumber {
				t.Fatalf("signal %d", m.Signal)
			}
		}
	})
}
