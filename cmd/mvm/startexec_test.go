package main

import (
	"os"
	"strconv"
	"testing"
	"time"
)

func TestStartBeforeExec(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name, value string
		want        time.Duration // how long before now
	}{
		{"5 ms before", strconv.FormatInt(now.Add(-5*time.Millisecond).UnixNano(), 10), 5 * time.Millisecond},
		{"in the future", strconv.FormatInt(now.Add(time.Second).UnixNano(), 10), 0},
		{"an hour old", strconv.FormatInt(now.Add(-time.Hour).UnixNano(), 10), 0},
		{"not a number", "soon", 0},
	} {
		t.Setenv(startEnv, c.value)
		got := startBeforeExec(now)
		if d := now.Sub(got); d != c.want {
			t.Errorf("%s: start %v before now, want %v", c.name, d, c.want)
		}
		if _, ok := os.LookupEnv(startEnv); ok {
			t.Errorf("%s: %s still set", c.name, startEnv)
		}
	}
	os.Unsetenv(startEnv)
	if got := startBeforeExec(now); !got.Equal(now) {
		t.Errorf("without %s: %v, want now", startEnv, got)
	}
}
