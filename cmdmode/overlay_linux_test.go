package cmdmode

import "testing"

// TestHasFilesystem: /proc/filesystems lists one file system a line, with
// "nodev" before those without a device (fs/filesystems.c,
// filesystems_proc_show); overlay is such a one.
func TestHasFilesystem(t *testing.T) {
	p := fakeProbe{fs: "nodev\tsysfs\nnodev\ttmpfs\n\text4\nnodev\toverlay\nnodev\tfuse\n"}
	for fs, want := range map[string]bool{"overlay": true, "ext4": true, "fuse": true, "overlayfs": false, "nodev": false, "virtiofs": false} {
		if got := hasFilesystem(p, fs); got != want {
			t.Errorf("hasFilesystem(%q) = %v, want %v", fs, got, want)
		}
	}
	if hasFilesystem(fakeProbe{}, "overlay") {
		t.Error("an empty /proc/filesystems lists overlay")
	}
}
