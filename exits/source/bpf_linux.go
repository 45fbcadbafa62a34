//go:build linux

package source

import (
	"log/slog"

	"github.com/mvm-dev/mvm/exits/bpfagg"
	"github.com/mvm-dev/mvm/exits/tracepoint"
)

// OpenBPF loads and attaches the BPF counters of cfg (cfg.Tracefs ""
// finds tracefs first, mounting it where absent and permitted); the error
// says why the kernel refused them.
func OpenBPF(cfg bpfagg.Config, log *slog.Logger) (*bpfagg.Counter, error) {
	if cfg.Tracefs == "" {
		env := tracepoint.SystemEnv(true)
		env.Logger = log
		root, err := tracepoint.ProbeEnv(env)
		if err != nil {
			return nil, err
		}
		cfg.Tracefs = root
	}
	return bpfagg.New(cfg)
}
