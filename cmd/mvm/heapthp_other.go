//go:build !linux

package main

// noHeapTHP: transparent huge pages are Linux's (heapthp_linux.go).
func noHeapTHP() {}
