//go:build linux && arm64

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mvm-dev/mvm/runsummary"
)

// busyboxTree makes a small root tree for --rootfs on the host's root
// (outside /tmp, which the guest has its own tmpfs on): the lab's static
// busybox as /bin/busybox with the applets the tests use, the mount
// points the init moves /proc, /sys and /dev to, /tmp, and a /data
// directory with one file.
func busyboxTree(t *testing.T) string {
	t.Helper()
	root := rootDir(t)
	for _, d := range []string{"bin", "proc", "sys", "dev", "tmp", "data"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bb, err := os.ReadFile(env(t, "MVM_BUSYBOX"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"sh", "cat", "echo", "grep", "sleep", "ls", "pwd"} {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "data", "orig"), []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestCommandModeBench: what mvm bench -- CMD and command mode's --rootfs
// do beyond TestBenchAB's A/A2/B bench (which runs on a busybox tree as
// --rootfs too), one boot each: a command that exits 3 is a failed run
// saying so; --overlay over the tree's /data takes writes in the guest and
// leaves the host's directory as it was, and a working directory the tree
// lacks is /; bad --rootfs and --overlay values are one line and exit 125
// before anything starts.
func TestCommandModeBench(t *testing.T) {
	tree := busyboxTree(t)
	cmdArgs := append(commandArgs(t)[1:], "--rootfs", tree)

	// A command that fails: a failed run with its status, no sample.
	r, rep, _ := benchRun(t, 5*time.Minute, 3*time.Minute, append(cmdArgs, "--runs", "1", "--warmup", "0",
		"--", "/bin/sh", "-c", "echo broken >&2; exit 3")...)
	if r.code != 3 || len(rep.Analysis.Failed) != 1 || !strings.Contains(rep.Analysis.Failed[0].Error, "the command exited with status 3: broken") {
		t.Errorf("failing command: exit status %d, failed runs %+v; want 3 and one run saying the command exited with status 3\nstderr:\n%s", r.code, rep.Analysis.Failed, r.stderr)
	}
	if _, ok := rep.Analysis.Cell(1, "A", runsummary.PhaseCommand); ok {
		t.Error("the failed command's run is a sample")
	}

	// --overlay: written in the guest, unchanged on the host; the host's
	// working directory is not in the tree, so the command runs in /.
	r = mvmCmd(t, 3*time.Minute, func(c *exec.Cmd) { c.Dir = rootDir(t) }, append(commandArgs(t, "--rootfs", tree, "--overlay", "/data"),
		"--", "/bin/sh", "-c", `echo guest >/data/orig && echo new >/data/new && cat /data/orig /data/new && pwd && ls /bin/busybox`)...)
	if r.code != 0 || r.stdout != "guest\nnew\n/\n/bin/busybox\n" {
		t.Errorf("--overlay: exit status %d, stdout %q, want 0 and \"guest\\nnew\\n/\\n/bin/busybox\\n\"\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(tree, "data", "orig")); err != nil || string(b) != "host\n" {
		t.Errorf("the host's /data/orig after the overlay run: %q, %v; want unchanged", b, err)
	}
	if _, err := os.Stat(filepath.Join(tree, "data", "new")); err == nil {
		t.Error("a file written to the overlay is on the host")
	}
	noVirtiofsdLeft(t)

	notDir := filepath.Join(tree, "data", "orig")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--rootfs", filepath.Join(tree, "none")}, "--rootfs " + filepath.Join(tree, "none") + ": no such file or directory"},
		{[]string{"--rootfs", notDir}, "is not a directory"},
		{[]string{"--rootfs", filepath.Join(tree, "bin")}, "has no /proc"},
		{[]string{"--overlay", "/no-such-dir"}, "--overlay /no-such-dir: no such file or directory"},
		{[]string{"--rootfs", tree, "--overlay", "/bin/sh"}, "is not a directory"},
	} {
		r := mvm(t, time.Minute, append(commandArgs(t, c.args...), "--", "true")...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 125 || len(lines) != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit status %d, stderr %q; want 125 and one line with %q", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
	noVirtiofsdLeft(t)
}
