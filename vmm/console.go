package vmm

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/mvm-dev/mvm/runsummary"
)

// ConsoleMarker names a regular expression matched against console lines.
type ConsoleMarker struct {
	Name string
	Re   *regexp.Regexp
}

// ParseConsoleMarker parses NAME=REGEX (the --marker flag).
func ParseConsoleMarker(s string) (ConsoleMarker, error) {
	name, expr, ok := strings.Cut(s, "=")
	if !ok || name == "" || expr == "" {
		return ConsoleMarker{}, fmt.Errorf("marker %q: want NAME=REGEX, e.g. init='Run /init'", s)
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return ConsoleMarker{}, fmt.Errorf("marker %s: %w", name, err)
	}
	return ConsoleMarker{Name: name, Re: re}, nil
}

// DefaultConsoleMarkers are always watched.
func DefaultConsoleMarkers() []ConsoleMarker {
	return []ConsoleMarker{{runsummary.ConsoleMarkSMP, regexp.MustCompile(`smp: Brought up \d+ nodes?, \d+ CPUs?`)}}
}

// consoleWatcher passes console output through and records when each
// marker first matches a line. The UART writes one byte at a time, so it
// only buffers the current line and matches at its end.
type consoleWatcher struct {
	w       io.Writer
	markers []ConsoleMarker
	prefix  [][]byte // per marker, what a matching line must contain

	mu   sync.Mutex
	line []byte
	seen map[string]time.Time
}

const maxConsoleLine = 4096

func newConsoleWatcher(w io.Writer, markers []ConsoleMarker) *consoleWatcher {
	c := &consoleWatcher{w: w, markers: markers, seen: map[string]time.Time{}}
	for _, m := range markers {
		// Every match starts with the literal prefix (regexp.LiteralPrefix).
		p, _ := m.Re.LiteralPrefix()
		c.prefix = append(c.prefix, []byte(p))
	}
	return c
}

func (c *consoleWatcher) Write(p []byte) (int, error) {
	now := time.Now()
	c.mu.Lock()
	for _, b := range p {
		if b == '\n' {
			c.match(now)
			c.line = c.line[:0]
			continue
		}
		if len(c.line) < maxConsoleLine {
			c.line = append(c.line, b)
		}
	}
	c.mu.Unlock()
	return c.w.Write(p)
}

func (c *consoleWatcher) match(now time.Time) {
	if len(c.seen) == len(c.markers) {
		return
	}
	for i, m := range c.markers {
		if _, ok := c.seen[m.Name]; ok {
			continue
		}
		// A line without the expression's literal prefix cannot match:
		// most lines then cost a byte search, not a regexp run (whose
		// code a running VM need not keep mapped, docs/footprint.md).
		if p := c.prefix[i]; len(p) > 0 && !bytes.Contains(c.line, p) {
			continue
		}
		if m.Re.Match(c.line) {
			c.seen[m.Name] = now
		}
	}
}

// marks returns a copy of the first-match times.
func (c *consoleWatcher) marks() map[string]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]time.Time, len(c.seen))
	for k, v := range c.seen {
		out[k] = v
	}
	return out
}

// reset forgets matches (guest reboot).
func (c *consoleWatcher) reset() {
	c.mu.Lock()
	c.seen = map[string]time.Time{}
	c.line = c.line[:0]
	c.mu.Unlock()
}
