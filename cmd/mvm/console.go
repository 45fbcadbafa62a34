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
	file    *lazyFile // file:PATH
	closeFn func()
	once    sync.Once
}

// create makes the file of a file:PATH console. Called once the VM is
// built and before it runs: a run that fails earlier leaves no file behind,
// and a file that cannot be created stops mvm before the guest starts
// instead of losing its console silently.
func (c *console) create() error {
	if c.file == nil {
		return nil
	}
	return c.file.create()
}

// Close restores the terminal / closes the file; safe to call twice.
func (c *console) Close() {
	c.once.Do(func() {
		if c.closeFn != nil {
			c.closeFn()
		}
	})
}

// checkConsole checks a --console value without opening anything: one of
// stdio, none, or file:PATH where PATH can be created (checkOutput).
func checkConsole(spec string) error {
	switch {
	case spec == "stdio" || spec == "none":
		return nil
	case strings.HasPrefix(spec, "file:"):
		path := strings.TrimPrefix(spec, "file:")
		if path == "" {
			return usageError{fmt.Errorf("--console file: needs a path, e.g. file:console.log")}
		}
		return checkOutput("--console file:", path)
	}
	return usageError{fmt.Errorf("--console %q: use stdio, none or file:PATH", spec)}
}

// openConsole sets up --console: "stdio" (raw terminal input when stdin is a
// terminal, with Ctrl-A x to quit), "none", or "file:PATH".
func openConsole(spec string, quit func(error)) (*console, error) {
	if err := checkConsole(spec); err != nil {
		return nil, err
	}
	switch {
	case spec == "none":
		return &console{out: io.Discard}, nil
	case strings.HasPrefix(spec, "file:"):
		lf := &lazyFile{flag: "--console file:", path: strings.TrimPrefix(spec, "file:")}
		return &console{out: lf, file: lf, closeFn: lf.close}, nil
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
// Ctrl-A Ctrl-A sends one Ctrl-A to the guest. A Ctrl-A may end one read
// and its command byte start the next.
type escapeReader struct {
	r       io.Reader
	quit    func()
	pending bool   // saw Ctrl-A
	scratch []byte // raw input
	out     []byte // filtered bytes not yet returned
	eof     error  // set once quit was typed or the input ended
}

const ctrlA = 0x01

func (e *escapeReader) Read(p []byte) (int, error) {
	for len(e.out) == 0 && e.eof == nil {
		if e.scratch == nil {
			e.scratch = make([]byte, 256)
		}
		n, err := e.r.Read(e.scratch)
		e.filter(e.scratch[:n])
		if err != nil && e.eof == nil {
			e.eof = err
		}
	}
	n := copy(p, e.out)
	e.out = e.out[n:]
	if len(e.out) == 0 && e.eof != nil {
		return n, e.eof
	}
	return n, nil
}

func (e *escapeReader) filter(in []byte) {
	for _, c := range in {
		if e.eof != nil {
			return
		}
		switch {
		case e.pending:
			e.pending = false
			switch c {
			case 'x', 'X':
				e.quit()
				e.eof = io.EOF
			case ctrlA:
				e.out = append(e.out, ctrlA)
			default:
				e.out = append(e.out, ctrlA, c)
			}
		case c == ctrlA:
			e.pending = true
		default:
			e.out = append(e.out, c)
		}
	}
}

// lazyFile is an output file (a console file, mvm profile --out) created
// only when create is called or at the first write, so a run that fails
// before then leaves none behind.
type lazyFile struct {
	flag string // for messages: the flag that named path
	path string
	mu   sync.Mutex
	f    *os.File
	err  error
}

func (l *lazyFile) create() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.createLocked()
}

func (l *lazyFile) createLocked() error {
	if l.f == nil && l.err == nil {
		if l.f, l.err = os.Create(l.path); l.err != nil {
			l.err = fmt.Errorf("%s%s: %w", l.flag, l.path, l.err)
		}
	}
	return l.err
}

func (l *lazyFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.createLocked(); err != nil {
		return 0, err
	}
	return l.f.Write(p)
}

func (l *lazyFile) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
	}
}
