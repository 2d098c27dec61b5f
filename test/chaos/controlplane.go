package chaos

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
)

// A member's own control plane can fail in ways fedfailover neither causes
// nor can repair. The one the campaign met: kube-scheduler loses track of a
// pod whose binding raced an API server restart, logs that its cache is
// corrupted, and never schedules that pod again (kubernetes/kubernetes
// #28883, #120512). The run then cannot converge, and neither can every
// later run, since the lab goes on with that scheduler. So each run reads
// what the members' schedulers logged during it: a corruption is named in
// the run's result and in its I4 message (the violation still counts), and
// that member's scheduler is restarted before the next run, as an operator
// would, so one upstream fault is judged once.

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
// corrupted during the run, adds that to the run's I4 violations, and
// restarts those schedulers.
func (c *Campaign) controlPlaneFaults(ctx context.Context, res *RunResult) error {
	faults, err := c.schedulerFaults()
	if err != nil || len(faults) == 0 {
		return err
	}
	for m, lines := range faults {
		what := fmt.Sprintf("%s: kube-scheduler reported its cache corrupted (%d times; first: %s)", m, len(lines), lines[0])
		res.ControlPlaneFaults = append(res.ControlPlaneFaults, what)
		for i := range res.Violations {
			if res.Violations[i].Invariant == I4 {
				res.Violations[i].Message += "; during the run " + what
			}
		}
		c.logf("    member control-plane fault: %s; restarting %s's kube-scheduler", what, m)
		if err := c.lab.RestartScheduler(ctx, m); err != nil {
			return err
		}
		if _, err := c.schedLogs[m].read(); err != nil { // its start-up lines are not this run's
			return err
		}
	}
	return nil
}
