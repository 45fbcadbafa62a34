// Command bpfstat reports what mvm's BPF programs cost: it turns on the
// kernel's BPF run-time statistics (BPF_ENABLE_STATS, as
// kernel.bpf_stats_enabled does) for as long as it runs, polls every
// program named mvm_* every 200 ms, and on SIGTERM or SIGINT prints each
// one's run count, total run time and time per run (docs/profile.md,
// "Where the BPF path's time goes"). In the lab, around one profiled run:
//
//	/lab/bpfstat > stats.txt & sleep 0.5; mvm run ... --profile; kill -TERM $!; wait
package main

import (
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
)

// prog is one program's last figures.
type prog struct {
	name     string
	runs     uint64
	runtime  time.Duration
	jited    uint32
	verified uint32
}

func main() {
	// BPF_STATS_RUN_TIME (include/uapi/linux/bpf.h, enum bpf_stats_type).
	stats, err := ebpf.EnableStats(0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bpfstat: enable BPF run-time statistics:", err, "(needs CAP_SYS_ADMIN)")
		os.Exit(1)
	}
	defer stats.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	// Programs are kept open once seen: their figures stay readable after
	// mvm detaches them.
	open := map[ebpf.ProgramID]*ebpf.Program{}
	last := map[ebpf.ProgramID]*prog{}
	for {
		select {
		case <-sig:
			report(last)
			return
		case <-time.After(200 * time.Millisecond):
		}
		for id, err := ebpf.ProgramGetNextID(0); err == nil; id, err = ebpf.ProgramGetNextID(id) {
			p := open[id]
			if p == nil {
				if p, err = ebpf.NewProgramFromID(id); err != nil {
					continue
				}
				info, err := p.Info()
				if err != nil || !strings.HasPrefix(info.Name, "mvm_") {
					p.Close()
					continue
				}
				open[id] = p
				r := &prog{name: info.Name}
				r.jited, _ = info.JitedSize()
				r.verified, _ = info.VerifiedInstructions()
				last[id] = r
			}
			if s, err := p.Stats(); err == nil {
				last[id].runs, last[id].runtime = s.RunCount, s.Runtime
			}
		}
	}
}

func report(last map[ebpf.ProgramID]*prog) {
	var ps []*prog
	for _, p := range last {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].name < ps[j].name })
	for _, p := range ps {
		per := 0.0
		if p.runs > 0 {
			per = float64(p.runtime.Nanoseconds()) / float64(p.runs)
		}
		fmt.Printf("%-16s runs %9d  runtime %8.1f ms  %7.0f ns/run  jited %d B  verified %d insns\n",
			p.name, p.runs, float64(p.runtime.Nanoseconds())/1e6, per, p.jited, p.verified)
	}
}
