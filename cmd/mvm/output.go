package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// checkOutput checks, without creating anything, that path can be created
// or overwritten later: it is not a directory, and it, or the directory it
// would go in, is writable. Output files (--result-json, --profile-out, a
// console file, ...) are written only once there is something to write, so
// a bad one is found here, before the host is probed, and a run that
// fails leaves none behind. flag names the flag in the message; "-" (where
// a flag means stdout by it) is not checked.
func checkOutput(flag, path string) error {
	if path == "" || path == "-" {
		return nil
	}
	label := flag + " " + path
	if strings.HasSuffix(flag, ":") { // --console file:PATH
		label = flag + path
	}
	bad := func(format string, a ...any) error {
		return usageError{fmt.Errorf("%s: %s", label, fmt.Sprintf(format, a...))}
	}
	st, err := os.Stat(path)
	switch {
	case err == nil && st.IsDir():
		return bad("is a directory; give a file name")
	case err == nil:
		// access(2) with W_OK also fails with EROFS on a read-only file
		// system.
		if err := unix.Access(path, unix.W_OK); err != nil {
			return bad("exists and cannot be overwritten (%v)", err)
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return bad("%v", unwrapPath(err))
	}
	dir := filepath.Dir(path)
	st, err = os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return bad("directory %s does not exist; create it first or write elsewhere", dir)
	case err != nil:
		return bad("%v", unwrapPath(err))
	case !st.IsDir():
		return bad("%s is not a directory", dir)
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return bad("cannot create a file in %s (%v)", dir, err)
	}
	return nil
}

// checkOutputDir is checkOutput for a directory that will be created with
// its parents if missing (mvm bench --console-dir): an existing one must be
// a writable directory, else the nearest existing ancestor must be.
func checkOutputDir(flag, dir string) error {
	if dir == "" {
		return nil
	}
	bad := func(format string, a ...any) error {
		return usageError{fmt.Errorf("%s %s: %s", flag, dir, fmt.Sprintf(format, a...))}
	}
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		switch {
		case (errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR)) && d != filepath.Dir(d):
			continue // created by MkdirAll, or a file on the way
		case err != nil:
			return bad("%v", unwrapPath(err))
		case !st.IsDir():
			return bad("%s is not a directory", d)
		}
		if err := unix.Access(d, unix.W_OK|unix.X_OK); err != nil {
			return bad("cannot create files in %s (%v)", d, err)
		}
		return nil
	}
}

// unwrapPath drops the operation and path of a *fs.PathError, which the
// messages above already name.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
