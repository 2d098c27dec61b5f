package bench

import (
	"testing"
	"time"
)

func TestPressureOverAWindow(t *testing.T) {
	cpu0 := "some avg10=0.00 avg60=0.24 avg300=6.90 total=9016707842\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
	io0 := "some avg10=0.29 avg60=0.07 avg300=0.12 total=161233447\nfull avg10=0.29 avg60=0.07 avg300=0.09 total=117646261\n"
	a := stallTotals{}
	var ok bool
	if a.cpuSome, ok = stallTotal(cpu0, "some"); !ok || a.cpuSome != 9016707842 {
		t.Fatalf("cpu some total %v %v", a.cpuSome, ok)
	}
	if a.ioFull, ok = stallTotal(io0, "full"); !ok || a.ioFull != 117646261 {
		t.Fatalf("io full total %v %v", a.ioFull, ok)
	}
	if _, ok := stallTotal("some avg10=0.00\n", "some"); ok {
		t.Error("a line without total= read as a total")
	}
	a.ioSome, _ = stallTotal(io0, "some")
	// 120 s later: CPU stalled 30 s, I/O 60 s (some) and 12 s (full).
	b := stallTotals{cpuSome: a.cpuSome + 30e6, ioSome: a.ioSome + 60e6, ioFull: a.ioFull + 12e6}
	p := pressureOver(a, b, 2*time.Minute)
	if p.CPUSomePercent != 25 || p.IOSomePercent != 50 || p.IOFullPercent != 10 {
		t.Errorf("pressure %+v, want 25 / 50 / 10 %%", *p)
	}
}
