package main

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// outFiles collects the files the lab's /init sends over the console
// (fileBegin NAME, base64 of the gzipped file, fileEnd) and writes each
// into dir. Console lines that are not base64 inside a block — a kernel
// message printed in between — are skipped; gzip's checksum catches any
// damage they did.
type outFiles struct {
	dir  string
	name string // the file being received; "" outside a block
	b64  strings.Builder
	got  []string
	errs []error
}

// maxOutFile bounds one file (decompressed): the lab sends results, not
// disk images.
const maxOutFile = 64 << 20

// line consumes a console line and reports whether it was part of a file
// block (and so is not shown).
func (o *outFiles) line(l string) bool {
	if name, ok := strings.CutPrefix(l, fileBegin); ok {
		o.name = name
		o.b64.Reset()
		return true
	}
	if o.name == "" {
		return false
	}
	if l == fileEnd {
		if err := o.save(o.name, o.b64.String()); err != nil {
			o.errs = append(o.errs, fmt.Errorf("lab output %q: %w", o.name, err))
		} else {
			o.got = append(o.got, o.name)
		}
		o.name = ""
		return true
	}
	if isBase64(l) {
		o.b64.WriteString(l)
		return true
	}
	return false
}

func isBase64(l string) bool {
	for _, c := range l {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return l != ""
}

func (o *outFiles) save(name, b64 string) error {
	if o.dir == "" {
		return errors.New("sent without -out")
	}
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." || strings.HasPrefix(name, ".") {
		return errors.New("not a plain file name")
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return fmt.Errorf("base64: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("gzip: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(zr, maxOutFile+1))
	if err != nil {
		return fmt.Errorf("gzip: %w (damaged on the console?)", err)
	}
	if len(data) > maxOutFile {
		return fmt.Errorf("larger than %d MiB", maxOutFile>>20)
	}
	return os.WriteFile(filepath.Join(o.dir, name), data, 0o644)
}

// err reports the files that could not be received, and a block the
// console cut off.
func (o *outFiles) err() error {
	errs := o.errs
	if o.name != "" {
		errs = append(errs, fmt.Errorf("lab output %q: the console ended inside it", o.name))
	}
	return errors.Join(errs...)
}
