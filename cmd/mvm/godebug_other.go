//go:build !linux

package main

import "time"

// withRuntimeSettings: the settings are for Linux (godebug_linux.go).
func withRuntimeSettings(time.Time) {}
