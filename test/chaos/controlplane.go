package chaos

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// A member's own control plane can fail in ways fedfailover neither causes
// nor can repair. The one the campaign met: kube-scheduler finds a pod
// bound to another node than its cache assumed, a binding that raced an
// API server restart, logs that its cache is corrupted and exits
// (kubernetes/kubernetes #28883, #120512). On a real host the kubelet or
// systemd starts it again; the lab does the same (lab.superviseExited).
// Each run reads what the members' schedulers logged during it and names
// such a fault in the run's result and in its I4 message, so a run that
// fails around it says so; the violations still count.

// schedulerCorruption is kube-scheduler's message when its cache lost track
// of a pod.
const schedulerCorruption = "Scheduler cache is corrupted"

// corruptionLines returns the lines of a kube-scheduler log that report its
// cache corrupted.
func corruptionLines(log string) []string {
	var out []string
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, schedulerCorruption) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// logTail reads what a file gained since the last read.
type logTail struct {
	path   string
	offset int64
}

func (t *logTail) read() (string, error) {
	f, err := os.Open(t.path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }() // read only
	if _, err := f.Seek(t.offset, io.SeekStart); err != nil {
		return "", err
	}
	b, err := io.ReadAll(f)
	t.offset += int64(len(b))
	return string(b), err
}

// schedulerFaults returns, per member, the corruption lines its scheduler
// logged since the last call.
func (c *Campaign) schedulerFaults() (map[string][]string, error) {
	out := map[string][]string{}
	for m, t := range c.schedLogs {
		text, err := t.read()
		if err != nil {
			return nil, fmt.Errorf("reading %s's kube-scheduler log: %w", m, err)
		}
		if lines := corruptionLines(text); len(lines) > 0 {
			out[m] = lines
		}
	}
	return out, nil
}

// controlPlaneFaults names the members whose scheduler reported its cache
// corrupted during the run, in the run's result and its I4 violations.
func (c *Campaign) controlPlaneFaults(res *RunResult) error {
	faults, err := c.schedulerFaults()
	if err != nil || len(faults) == 0 {
		return err
	}
	for m, lines := range faults {
		what := fmt.Sprintf("%s: kube-scheduler reported its cache corrupted and exited, the lab restarted it (%d times; first: %s)", m, len(lines), lines[0])
		res.ControlPlaneFaults = append(res.ControlPlaneFaults, what)
		for i := range res.Violations {
			if res.Violations[i].Invariant == I4 {
				res.Violations[i].Message += "; during the run " + what
			}
		}
		c.logf("    member control-plane fault: %s", what)
	}
	return nil
}
