//go:build !linux

package main

import "time"

// withRuntimeSettings: the settings are for Linux (godebug_linux.go).
func withRuntimeSettings(time.Time) {}

// childEnviron: mvm's environment as it is (no exec changed it).
func childEnviron() []string { return nil }
