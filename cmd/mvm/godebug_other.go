//go:build !linux

package main

import "time"

// noHeapTHP: transparent huge pages are Linux's (heapthp_linux.go).
func noHeapTHP(time.Time) {}
