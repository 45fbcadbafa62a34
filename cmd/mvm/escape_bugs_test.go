package main

import (
	"io"
	"testing"
)

// chunkReader returns one chunk per Read.
type chunkReader struct{ chunks []string }

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	if c.chunks[0] == "" {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

// A Ctrl-A at the end of one read followed by a read of several bytes:
// the Ctrl-A and the next byte are written over input not yet scanned.
func TestEscapeReaderCtrlAAcrossReads(t *testing.T) {
	for _, tt := range []struct {
		chunks []string
		want   string
	}{
		{[]string{"\x01", "bc"}, "\x01bc"},
		{[]string{"a\x01", "bcdef"}, "a\x01bcdef"},
		{[]string{"\x01", "b\x01x"}, "\x01b"},
	} {
		e := &escapeReader{r: &chunkReader{chunks: append([]string(nil), tt.chunks...)}, quit: func() {}}
		got, _ := readAllFrom(t, e, 64)
		if string(got) != tt.want {
			t.Errorf("chunks %q: guest got %q, want %q", tt.chunks, got, tt.want)
		}
	}
}

// Read must never return more than len(p): vmm's console pump does
// buf[:n] on a 64-byte buffer, which panics for n = 65.
func TestEscapeReaderNeverOverfillsBuffer(t *testing.T) {
	full := make([]byte, 64)
	for i := range full {
		full[i] = 'a'
	}
	for _, size := range []int{1, 64} {
		e := &escapeReader{r: &chunkReader{chunks: []string{"\x01", string(full[:size])}}, quit: func() {}}
		buf := make([]byte, size)
		for i := 0; i < 3; i++ {
			n, err := e.Read(buf)
			if n > len(buf) {
				t.Fatalf("%d-byte buffer: Read returned n = %d", size, n)
			}
			if err != nil {
				break
			}
		}
	}
}
