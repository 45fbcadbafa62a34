// Command testinitrd writes the initramfs of mvm's Linux test guests
// (guest.TestInitramfs: busybox with guest.TestInit as /init), for lab
// scripts that boot those guests outside the integration tests, such as
// lab/boots64.sh:
//
//	go run ./lab/testinitrd .cache/lab/busybox out/lab/initrd.gz
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/mvm-dev/mvm/guest"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: testinitrd BUSYBOX OUT: write the Linux test guests' initramfs (gzip cpio) to OUT")
		os.Exit(2)
	}
	if err := os.MkdirAll(filepath.Dir(os.Args[2]), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "testinitrd:", err)
		os.Exit(1)
	}
	if err := guest.WriteTestInitramfs(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "testinitrd:", err)
		os.Exit(1)
	}
}
