package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/term"
)

// console is the guest serial console's host side.
type console struct {
	out     io.Writer
	in      io.Reader
	closeFn func()
	once    sync.Once
}

// Close restores the terminal / closes the file; safe to call twice.
func (c *console) Close() {
	c.once.Do(func() {
		if c.closeFn != nil {
			c.closeFn()
		}
	})
}

// openConsole sets up --console: "stdio" (raw terminal input when stdin is a
// terminal, with Ctrl-A x to quit), "none", or "file:PATH".
func openConsole(spec string, quit func(error)) (*console, error) {
	switch {
	case spec == "none":
		return &console{out: io.Discard}, nil
	case strings.HasPrefix(spec, "file:"):
		path := strings.TrimPrefix(spec, "file:")
		if path == "" {
			return nil, usageError{fmt.Errorf("--console file: needs a path, e.g. file:console.log")}
		}
		f, err := os.Create(path)
		if err != nil {
			return nil, fmt.Errorf("--console: %w", err)
		}
		return &console{out: f, closeFn: func() { f.Close() }}, nil
	case spec == "stdio":
		c := &console{out: os.Stdout}
		fd := int(os.Stdin.Fd())
		if !term.IsTerminal(fd) {
			c.in = os.Stdin
			return c, nil
		}
		old, err := term.MakeRaw(fd)
		if err != nil {
			return nil, fmt.Errorf("put the terminal in raw mode: %w", err)
		}
		c.closeFn = func() { term.Restore(fd, old) }
		c.in = &escapeReader{r: os.Stdin, quit: func() { quit(errQuit) }}
		return c, nil
	}
	return nil, usageError{fmt.Errorf("--console %q: use stdio, none or file:PATH", spec)}
}

// escapeReader passes input to the guest and watches for Ctrl-A x (quit);
// Ctrl-A Ctrl-A sends one Ctrl-A to the guest.
type escapeReader struct {
	r       io.Reader
	quit    func()
	pending bool // saw Ctrl-A
}

const ctrlA = 0x01

func (e *escapeReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	out := p[:0]
	for _, c := range p[:n] {
		switch {
		case e.pending:
			e.pending = false
			switch c {
			case 'x', 'X':
				e.quit()
				return len(out), io.EOF
			case ctrlA:
				out = append(out, ctrlA)
			default:
				out = append(out, ctrlA, c)
			}
		case c == ctrlA:
			e.pending = true
		default:
			out = append(out, c)
		}
	}
	return len(out), err
}
