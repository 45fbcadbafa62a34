package guest

import (
	"fmt"
	"os"
)

// TestInit is the /init of mvm's Linux test guests (busybox sh). It mounts
// the usual filesystems, writes the userspace boot marker, prints the lines
// the tests and benchmarks read (among them "mvm-guest: smp start S" and
// "mvm-guest: smp done S", the dmesg timestamps of the kernel's "smp:
// Bringing up secondary CPUs" and "smp: Brought up" lines), runs an
// optional command and powers off.
// Kernel command-line parameters it understands (the kernel passes unknown
// name=value parameters to init's environment):
//
//	mvm.delay_ms=N   sleep N ms before the userspace marker (A/B tests)
//	mvm.nomarker=1   write no userspace marker (as an ordinary initramfs)
//	mvm.root=DEV     after loading the modules, mount DEV (ext4, read-only)
//	                 and switch_root to its /sbin/init
//	mvm.cmd=...      not supported: use the script file /mvm-cmd if present
//
// Modules listed in /lib/modules/mvm/order (AddModules) are loaded first.
const TestInit = `#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /bin /sbin /usr/bin /usr/sbin /tmp
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
delay=$(sed -n 's/.*mvm.delay_ms=\([0-9]*\).*/\1/p' /proc/cmdline)
if [ -n "$delay" ]; then usleep $((delay * 1000)); fi
# Userspace reached: code 0x41 to mvm's boot-marker device.
if ! grep -q 'mvm.nomarker=1' /proc/cmdline; then
  devmem 0x09010000 8 0x41 2>/dev/null || echo "mvm-guest: boot marker write failed"
fi
if [ -f /lib/modules/mvm/order ]; then
	for m in $(cat /lib/modules/mvm/order); do
		insmod /lib/modules/mvm/$m || echo "mvm-guest: insmod $m failed"
	done
fi
root=$(sed -n 's/.*mvm.root=\([^ ]*\).*/\1/p' /proc/cmdline)
if [ -n "$root" ]; then
	i=0
	while [ ! -b "$root" ] && [ $i -lt 50 ]; do usleep 100000; i=$((i + 1)); done
	mkdir -p /newroot
	if mount -t ext4 -o ro "$root" /newroot; then
		mount --move /dev /newroot/dev 2>/dev/null
		exec switch_root /newroot /sbin/init
	fi
	echo "mvm-guest: cannot switch to root $root"
fi
echo "mvm-guest: nproc $(nproc)"
echo "mvm-guest: online $(cat /sys/devices/system/cpu/online)"
# The kernel's bring-up line, reworded so console markers that watch for
# the kernel's own line do not match this (later) copy of it.
dmesg | grep -m1 'smp: Brought up' | sed 's/^.*smp: Brought up/mvm-guest: kernel brought up/'
# The kernel's own timestamps (seconds) around secondary bring-up.
dmesg | sed -n 's/^\[ *\([0-9.]*\)\] smp: Bringing up secondary CPUs.*/mvm-guest: smp start \1/p; s/^\[ *\([0-9.]*\)\] smp: Brought up.*/mvm-guest: smp done \1/p'
if [ -x /mvm-cmd ]; then /mvm-cmd; fi
echo "mvm-guest: poweroff"
poweroff -f
`

// TestInitramfs builds the gzip-compressed initramfs of a Linux test guest
// from a static busybox binary, with TestInit as /init.
func TestInitramfs(busyboxPath string) ([]byte, error) {
	a := NewInitramfs()
	if err := a.AddHostFile("bin/busybox", busyboxPath); err != nil {
		return nil, fmt.Errorf("test initramfs: %w", err)
	}
	if err := a.AddFile("init", []byte(TestInit), 0o755); err != nil {
		return nil, err
	}
	return a.Gzip()
}

// TestInitramfsWith is TestInitramfs plus the kernel modules names from
// modulesDir (see AddModules; none when names is empty), the host files
// in files (archive path -> host path) and, if cmd is not empty, the shell
// script /mvm-cmd that TestInit runs.
func TestInitramfsWith(busyboxPath, modulesDir string, names []string, files map[string]string, cmd string) ([]byte, error) {
	a := NewInitramfs()
	if err := a.AddHostFile("bin/busybox", busyboxPath); err != nil {
		return nil, fmt.Errorf("test initramfs: %w", err)
	}
	if err := a.AddFile("init", []byte(TestInit), 0o755); err != nil {
		return nil, err
	}
	if len(names) > 0 {
		if err := a.AddModules(modulesDir, names); err != nil {
			return nil, err
		}
	}
	for name, host := range files {
		if err := a.AddHostFile(name, host); err != nil {
			return nil, err
		}
	}
	if cmd != "" {
		if err := a.AddFile("mvm-cmd", []byte("#!/bin/busybox sh\n"+cmd+"\n"), 0o755); err != nil {
			return nil, err
		}
	}
	return a.Gzip()
}

// WriteTestInitramfs writes TestInitramfs(busyboxPath) to path.
func WriteTestInitramfs(busyboxPath, path string) error {
	b, err := TestInitramfs(busyboxPath)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
