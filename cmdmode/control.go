package cmdmode

import "encoding/binary"

// What the host sends the init on the status port: a signal is one byte
// (1..64, the signal number, for the command's process group); a window
// size is ResizeByte and then rows and columns as big-endian 16-bit
// numbers (for the command's terminal in an interactive session).
const (
	ResizeByte = 0x80
	resizeLen  = 5
)

// Control is one message from the host: a signal or a window size.
type Control struct {
	Signal     int
	Rows, Cols uint16
}

// Resize encodes a window size.
func Resize(rows, cols uint16) []byte {
	b := []byte{ResizeByte, 0, 0, 0, 0}
	binary.BigEndian.PutUint16(b[1:], rows)
	binary.BigEndian.PutUint16(b[3:], cols)
	return b
}

// ParseControl takes the messages in b and returns them with the bytes of
// an incomplete one at the end, to be prefixed to the next read. Bytes
// that start no message (0, 65..127, 129..255) are skipped.
func ParseControl(b []byte) (msgs []Control, rest []byte) {
	for len(b) > 0 {
		switch c := b[0]; {
		case c >= 1 && c <= maxSignalNumber:
			msgs = append(msgs, Control{Signal: int(c)})
			b = b[1:]
		case c == ResizeByte:
			if len(b) < resizeLen {
				return msgs, b
			}
			msgs = append(msgs, Control{Rows: binary.BigEndian.Uint16(b[1:]), Cols: binary.BigEndian.Uint16(b[3:])})
			b = b[resizeLen:]
		default:
			b = b[1:]
		}
	}
	return msgs, nil
}
