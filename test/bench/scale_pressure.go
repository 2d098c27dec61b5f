package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// scPressure is the share of a window in which tasks stalled, from the
// kernel's pressure stall information (/proc/pressure): "some" is the
// share of time at least one task waited for the resource, "full" the
// share all non-idle tasks did. The load average the validity rule reads
// counts tasks waiting on I/O (uninterruptible sleep) with the runnable
// ones, so on a machine whose etcds fsync to one disk it can read high
// while the CPUs have room; these say which of the two it was.
type scPressure struct {
	CPUSomePercent float64 `json:"cpu_some_percent"`
	IOSomePercent  float64 `json:"io_some_percent"`
	IOFullPercent  float64 `json:"io_full_percent"`
}

// stallTotals are the cumulative stall times (/proc/pressure/*, total=, in
// microseconds).
type stallTotals struct{ cpuSome, ioSome, ioFull float64 }

// readStallTotals reads the machine's cumulative stall times; ok is false
// where the kernel does not report them.
func readStallTotals() (stallTotals, bool) {
	cpu, errC := os.ReadFile("/proc/pressure/cpu")
	io, errI := os.ReadFile("/proc/pressure/io")
	if errC != nil || errI != nil {
		return stallTotals{}, false
	}
	cs, ok1 := stallTotal(string(cpu), "some")
	is, ok2 := stallTotal(string(io), "some")
	ifull, ok3 := stallTotal(string(io), "full")
	return stallTotals{cpuSome: cs, ioSome: is, ioFull: ifull}, ok1 && ok2 && ok3
}

// stallTotal is the total= of the line of kind ("some" or "full") in a
// /proc/pressure file.
func stallTotal(text, kind string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != kind {
			continue
		}
		for _, kv := range f[1:] {
			if v, ok := strings.CutPrefix(kv, "total="); ok {
				n, err := strconv.ParseFloat(v, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}

// pressureOver is the stall shares between two readings a window apart.
func pressureOver(a, b stallTotals, window time.Duration) *scPressure {
	us := float64(window.Microseconds())
	if us <= 0 {
		return nil
	}
	pct := func(x, y float64) float64 { return round1(max(y-x, 0) / us * 100) }
	return &scPressure{CPUSomePercent: pct(a.cpuSome, b.cpuSome), IOSomePercent: pct(a.ioSome, b.ioSome), IOFullPercent: pct(a.ioFull, b.ioFull)}
}

func (p *scPressure) String() string {
	if p == nil {
		return "not reported by this kernel"
	}
	return fmt.Sprintf("CPU some %.1f%%, I/O some %.1f%%, I/O full %.1f%% of the window", p.CPUSomePercent, p.IOSomePercent, p.IOFullPercent)
}
