package exits

import "testing"

// Merge keeps min and max over both sides and takes a side's min only when
// it has times of that kind (a zero min of an empty side is no minimum).
func TestReasonStatsMerge(t *testing.T) {
	var s ReasonStats
	s.AddGuest(300)
	s.AddHandle(40)
	s.Merge(&ReasonStats{Count: 2, GuestCount: 2, GuestSumNS: 150, GuestMinNS: 50, GuestMaxNS: 100})
	s.Merge(&ReasonStats{Count: 1}) // no times at all
	s.Merge(&ReasonStats{Count: 1, HandleCount: 1, HandleSumNS: 90, HandleMinNS: 90, HandleMaxNS: 90})
	if s.Count != 4 || s.GuestCount != 3 || s.GuestSumNS != 450 || s.GuestMinNS != 50 || s.GuestMaxNS != 300 {
		t.Errorf("guest times %+v", s)
	}
	if s.HandleCount != 2 || s.HandleSumNS != 130 || s.HandleMinNS != 40 || s.HandleMaxNS != 90 {
		t.Errorf("handle times %+v", s)
	}
	var e ReasonStats
	e.Merge(&ReasonStats{Count: 1, GuestCount: 1, GuestSumNS: 70, GuestMinNS: 70, GuestMaxNS: 70})
	if e.GuestMinNS != 70 {
		t.Errorf("merged into empty: guest min %d, want 70", e.GuestMinNS)
	}
}
