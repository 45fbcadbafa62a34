package runsummary

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestReadersStayOffTheVMRuntime: reading a result or bench file does not
// pull in the VM runtime. `go list -deps` of bench and report (and of this
// package) names none of vmm, vcpu, devices or internal/kvm, on the host's
// architecture and on arm64, where the runtime's arm64-only files build;
// and this package itself depends on nothing that makes system calls of
// its own (no golang.org/x/sys, no hype).
func TestReadersStayOffTheVMRuntime(t *testing.T) {
	const module = "github.com/mvm-dev/mvm/"
	forbidden := []string{"vmm", "vcpu", "devices", "internal/kvm"}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	deps := func(t *testing.T, goarch string, pkgs ...string) []string {
		t.Helper()
		cmd := exec.Command(goTool, append([]string{"list", "-deps"}, pkgs...)...)
		cmd.Env = append(cmd.Environ(), "GOOS=linux", "GOARCH="+goarch)
		out, err := cmd.Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				t.Fatalf("go list -deps %s (GOARCH=%s): %v\n%s", strings.Join(pkgs, " "), goarch, err, ee.Stderr)
			}
			t.Fatalf("go list -deps: %v", err)
		}
		return strings.Fields(string(out))
	}
	for _, goarch := range []string{runtime.GOARCH, "arm64"} {
		readers := []string{module + "bench", module + "report", module + "runsummary"}
		all := deps(t, goarch, readers...)
		for _, r := range readers {
			if !slices.Contains(all, r) {
				t.Fatalf("GOARCH=%s: go list -deps does not list %s itself: the check looked at the wrong packages", goarch, r)
			}
		}
		for _, p := range all {
			rel, ok := strings.CutPrefix(p, module)
			if !ok {
				continue
			}
			for _, f := range forbidden {
				if rel == f || strings.HasPrefix(rel, f+"/") {
					t.Errorf("GOARCH=%s: bench, report or runsummary depends on %s: a result file's reader must not pull in the VM runtime (move what it needs into runsummary)", goarch, p)
				}
			}
		}
		for _, p := range deps(t, goarch, module+"runsummary") {
			if strings.HasPrefix(p, "golang.org/x/sys") || strings.HasPrefix(p, "github.com/c35s/hype") {
				t.Errorf("GOARCH=%s: runsummary depends on %s: it describes a run and makes no system calls of its own", goarch, p)
			}
		}
	}
}
