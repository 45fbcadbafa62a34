package main

import (
	"fmt"
	"strconv"
)

// profileMode is --profile's value. The flag stays a boolean to every
// existing use (--profile, --profile=true, --profile=false; the help
// shows it as one) and takes one more value, light.
type profileMode int

const (
	profileOff   profileMode = iota
	profileExact             // --profile: every exit through the tracepoints
	profileLight             // --profile=light: sampled windows (docs/profile.md)
)

func (m *profileMode) String() string {
	switch *m {
	case profileExact:
		return "true"
	case profileLight:
		return "light"
	}
	return "false"
}

func (m *profileMode) Set(s string) error {
	if s == "light" {
		*m = profileLight
		return nil
	}
	on, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("%q: use --profile (every exit), --profile=light (sampled) or --profile=false", s)
	}
	*m = profileOff
	if on {
		*m = profileExact
	}
	return nil
}

// Type is "bool" so that pflag prints the flag as the boolean it was
// (no value placeholder, no default).
func (m *profileMode) Type() string { return "bool" }
