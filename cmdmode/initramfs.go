package cmdmode

import (
	"encoding/json"
	"fmt"
	"os"
	"path"

	"github.com/mvm-dev/mvm/guest"
)

// Paths inside the initramfs.
const (
	InitPath   = "init"            // the kernel runs /init (rdinit's default)
	ConfigPath = "mvm/config.json" // GuestConfig
	moduleDir  = "mvm/modules"
)

// GuestConfig is what the init is told by the host, as JSON in the
// initramfs.
type GuestConfig struct {
	Args []string `json:"args"`
	Env  []string `json:"env"`
	// Dir is the working directory (the host's); / when the guest has
	// no such directory.
	Dir    string `json:"dir"`
	UID    int    `json:"uid"`
	GID    int    `json:"gid"`
	Groups []int  `json:"groups,omitempty"`
	// RootTag is the virtio-fs tag of the root.
	RootTag string `json:"root_tag"`
	// Tmpfs are mounted over these guest directories, where they exist.
	Tmpfs []string `json:"tmpfs"`
	// Shares are further virtio-fs shares to mount.
	Shares []GuestMount `json:"shares,omitempty"`
	// Overlays are directories of the root that get a writable tmpfs
	// overlay (--overlay), mounted after Tmpfs and before Shares.
	Overlays []string `json:"overlays,omitempty"`
	// Modules are initramfs paths of the modules to load, in order.
	Modules []string `json:"modules,omitempty"`
	// TTY: the command (an interactive shell) gets a terminal in the
	// guest, a pty the init relays to the stdin and stdout ports, Rows
	// by Cols at first.
	TTY  bool   `json:"tty,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
}

// GuestMount is one --share as the init mounts it.
type GuestMount struct {
	Tag      string `json:"tag"`
	At       string `json:"at"`
	ReadOnly bool   `json:"ro,omitempty"`
}

// DefaultTmpfs are the directories of the read-only root that programs
// expect to write to.
var DefaultTmpfs = []string{"/tmp", "/run", "/var/tmp", "/root"}

// Archive is the initramfs of a command-mode guest: init as /init, cfg
// as ConfigPath, and the modules (cfg.Modules is filled in from them).
// The init's bytes are read only when the archive is written.
func Archive(init InitFile, cfg GuestConfig, modules []Module) (*guest.Initramfs, error) {
	a := guest.NewInitramfs()
	if err := a.AddFileFrom(InitPath, init.Size, init.Open, 0o755); err != nil {
		return nil, err
	}
	cfg.Modules = nil
	for i, m := range modules {
		data, err := os.ReadFile(m.Path)
		if err != nil {
			return nil, fmt.Errorf("kernel module %s: %w", m.Name, err)
		}
		// Numbered, so two modules with one file name cannot collide.
		name := fmt.Sprintf("%s/%02d-%s", moduleDir, i, path.Base(m.Path))
		if err := a.AddFile(name, data, 0o644); err != nil {
			return nil, err
		}
		cfg.Modules = append(cfg.Modules, "/"+name)
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if err := a.AddFile(ConfigPath, js, 0o644); err != nil {
		return nil, err
	}
	for _, d := range []string{"proc", "sys", "dev", "newroot"} {
		if err := a.AddDir(d); err != nil {
			return nil, err
		}
	}
	return a, nil
}
