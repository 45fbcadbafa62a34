//go:build linux && amd64

package x86vm

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestProgramCode(t *testing.T) {
	for _, p := range []Program{{Outs: -1}, {Halts: 1 << 16}, {Port: DonePort}} {
		if _, err := p.Code(); err == nil {
			t.Errorf("%+v assembled", p)
		}
	}
	code, err := Program{Port: 0x1234, Outs: 0x0102, Halts: 3}.Code()
	if err != nil {
		t.Fatal(err)
	}
	if code[0] != 0xba || code[1] != 0x34 || code[2] != 0x12 || code[4] != 0x02 || code[5] != 0x01 {
		t.Errorf("code % x", code)
	}
}

// TestRunCounts runs the guest on /dev/kvm (failing without it) with and
// without loops.
func TestRunCounts(t *testing.T) {
	NeedKVM(t)
	for _, p := range []Program{{Port: 1}, {Port: 0x80, Outs: 3, Halts: 2}} {
		var seen int
		vm, err := New(p, Options{Exit: func(uint32, time.Duration) { seen++ }})
		if err != nil {
			t.Fatal(err)
		}
		res, err := vm.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.IO != p.Outs || res.Halts != p.Halts || !res.Done || seen != res.Runs {
			t.Errorf("%+v: result %+v, hook saw %d", p, res, seen)
		}
		if _, err := vm.Run(context.Background()); err == nil {
			t.Error("second Run accepted")
		}
		if err := vm.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestRunTimeout kicks a guest that is still running out of KVM_RUN.
func TestRunTimeout(t *testing.T) {
	NeedKVM(t)
	vm, err := New(Program{Port: 1, Outs: 65535, Halts: 65535}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
	defer cancel()
	res, err := vm.Run(ctx)
	if err == nil || res.Done {
		t.Fatalf("guest of 131071 exits finished in 2ms: %+v", res)
	}
	if !errors.Is(err, context.DeadlineExceeded) && res.Intr == 0 {
		t.Logf("stopped with %v after %+v", err, res)
	}
}

// TestCloseWithoutRun releases a started vCPU goroutine.
func TestCloseWithoutRun(t *testing.T) {
	NeedKVM(t)
	vm, err := New(Program{Port: 1}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tid, err := vm.Thread()
	if err != nil || tid <= 0 {
		t.Fatalf("thread %d, %v", tid, err)
	}
	if again, _ := vm.Thread(); again != tid {
		t.Errorf("Thread changed: %d then %d", tid, again)
	}
	if err := vm.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := vm.Run(context.Background()); err == nil {
		t.Error("Run after Close accepted")
	}
	if _, err := DetectBackend(); err != nil {
		t.Error(err)
	}
}
