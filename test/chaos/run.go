package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fedfailover/fedfailover/test/lab"
)

// Applied is a fault as it happened.
type Applied struct {
	Fault
	// Started and Undone are wall-clock times; Error says why the fault
	// could not be injected (it then counts as not injected).
	Started time.Time `json:"started"`
	Undone  time.Time `json:"undone,omitzero"`
	Error   string    `json:"error,omitempty"`
}

// RunResult is one run of the campaign.
type RunResult struct {
	Run        int         `json:"run"`
	Seed       uint64      `json:"seed"`
	Timeline   []Applied   `json:"timeline"`
	Violations []Violation `json:"violations"`
	// ConvergenceSeconds is from the last fault undone to I4 holding, or to
	// the bound when Converged is false.
	ConvergenceSeconds float64        `json:"convergenceSeconds"`
	Converged          bool           `json:"converged"`
	Destructive        []Act          `json:"destructiveActs"`
	Writes             map[string]int `json:"writes"`
	Seconds            float64        `json:"seconds"`
	// ControlPlaneFaults are faults of a member's own control plane seen
	// during the run (controlplane.go): named, never a verdict on fedfailover.
	ControlPlaneFaults []string `json:"controlPlaneFaults,omitempty"`
	// StormSeen is a storm the checker saw in a member's own reads, whose
	// cooldown could move I4's bound (storm.go).
	StormSeen string `json:"stormSeen,omitempty"`
}

// checkEvery is how often the checker samples the federation and reads
// the audit logs.
const checkEvery = time.Second

// run draws and injects one schedule while checking, then waits for
// convergence. An error means the lab could not be driven (not a finding).
func (c *Campaign) run(ctx context.Context, n int, seed uint64) (*RunResult, error) {
	sched := Draw(seed, c.topology, Params{Window: c.cfg.Window, Faults: c.cfg.Faults, MinHold: c.cfg.MinHold, MaxHold: c.cfg.MaxHold, LossMaxHold: c.cfg.LossMaxHold})
	c.logf("==> run %d/%d, seed %d: %d faults in %s", n, c.cfg.Runs, seed, len(sched), c.cfg.Window)
	for _, f := range sched {
		c.logf("    %s", f)
	}
	for _, t := range c.tails { // what came before belongs to the previous run
		if _, err := t.read(); err != nil {
			return nil, err
		}
	}
	for _, t := range c.schedLogs {
		if _, err := t.read(); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	tr := NewTruth(start, c.topology)
	c.fence.startRun(tr)
	chk := NewChecker(tr, c.cfg.Bounds, c.baseline)
	chk.WatchStorms(c.policyBaseline[livePolicy].NodeRecovery, c.topology)
	res := &RunResult{Run: n, Seed: seed}

	checkCtx, stopChecking := context.WithCancel(ctx)
	checked := make(chan error, 1)
	go func() { checked <- c.check(checkCtx, chk) }()

	timeline := make([]Applied, len(sched))
	var wg sync.WaitGroup
	for i, f := range sched {
		wg.Go(func() { timeline[i] = c.inject(ctx, tr, start, f) })
	}
	wg.Wait()
	c.fence.undone() // before clearAll: a power-off during it is seen
	if err := c.clearAll(ctx, tr); err != nil {
		stopChecking()
		return nil, errors.Join(err, <-checked)
	}
	faultsEnd := time.Now()
	c.logf("    faults undone at +%.0fs; waiting for convergence (bound %s)", faultsEnd.Sub(start).Seconds(), c.cfg.Bounds.Converge)
	convErr := c.awaitConvergence(ctx, tr, chk, faultsEnd, res)
	res.ConvergenceSeconds = time.Since(faultsEnd).Seconds()
	stopChecking()
	if err := <-checked; err != nil {
		return nil, err
	}
	res.Converged = convErr == nil
	if convErr != nil {
		chk.violations = append(chk.violations, Violation{Invariant: I4, Time: time.Now(), Message: convErr.Error()})
	}
	res.Timeline, res.Violations, res.Destructive, res.Writes = timeline, chk.Violations(), chk.Acts, chk.Writes
	if err := c.controlPlaneFaults(res); err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	for _, v := range res.Violations {
		c.logf("    VIOLATION %s", v)
	}
	c.logf("    run %d: %d violations, converged in %s s, %d destructive acts", n, len(res.Violations),
		convergedIn(res), len(res.Destructive))
	return res, nil
}

// awaitConvergence waits for I4 until Converge after the last fault undone
// or, when later, after the cooldown of the last storm the checker saw
// (storm.go), noting such a storm in res. Meanwhile it powers on nodes the
// fence agent powered off after the faults were undone (rebootFenced).
func (c *Campaign) awaitConvergence(ctx context.Context, tr *Truth, chk *Checker, faultsEnd time.Time, res *RunResult) error {
	deadline := faultsEnd.Add(c.cfg.Bounds.Converge)
	converged := c.tracedConvergence(faultsEnd)
	cond := func(ctx context.Context) (bool, string) {
		if err := c.fence.rebootFenced(ctx, tr); err != nil {
			return false, err.Error()
		}
		return converged(ctx)
	}
	for {
		err := until(ctx, time.Until(deadline), "convergence", cond)
		held, seen := chk.StormHeld()
		if seen != "" {
			res.StormSeen = seen
		}
		if err == nil || ctx.Err() != nil {
			return err
		}
		later := held.Add(c.cfg.Bounds.Converge)
		if !later.After(deadline) {
			if seen != "" {
				err = fmt.Errorf("%w; bound moved by a %s", err, seen)
			}
			return err
		}
		c.logf("    I4's bound moves to %s by a %s", later.Format("15:04:05"), seen)
		deadline = later
	}
}

// tracedConvergence is c.converged, logging what still differs every
// 30 s: a slow convergence says why even when it makes the bound.
func (c *Campaign) tracedConvergence(since time.Time) func(context.Context) (bool, string) {
	next := since.Add(30 * time.Second)
	return func(ctx context.Context) (bool, string) {
		ok, why := c.converged(ctx)
		if !ok && time.Now().After(next) {
			next = time.Now().Add(30 * time.Second)
			c.logf("    not converged after %.0fs: %s", time.Since(since).Seconds(), why)
		}
		return ok, why
	}
}

func convergedIn(res *RunResult) string {
	if !res.Converged {
		return "-"
	}
	return fmt.Sprintf("%.0f", res.ConvergenceSeconds)
}

// check feeds the checker until ctx ends: the audit logs' acts and a sample
// of the federation every checkEvery, and reports a manager that exited on
// its own (then restarted, so the campaign goes on).
func (c *Campaign) check(ctx context.Context, chk *Checker) error {
	tick := time.NewTicker(checkEvery)
	defer tick.Stop()
	for {
		for _, t := range c.tails {
			acts, err := t.read()
			if err != nil {
				return err
			}
			for _, a := range acts {
				chk.Act(a)
			}
		}
		if err := c.crashed(); err != nil {
			chk.violations = append(chk.violations, Violation{Invariant: I4, Time: time.Now(), Message: err.Error()})
			if err := c.startManager(nil); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		chk.Sample(c.sample(ctx))
	}
}

// inject waits for f's start, applies it, holds it and undoes it.
func (c *Campaign) inject(ctx context.Context, tr *Truth, start time.Time, f Fault) Applied {
	a := Applied{Fault: f}
	select {
	case <-ctx.Done():
		a.Error = ctx.Err().Error()
		return a
	case <-time.After(time.Until(start.Add(f.At))):
	}
	a.Started = time.Now()
	u, err := c.apply(ctx, tr, f)
	if err != nil {
		a.Error = err.Error()
		c.logf("    +%3.0fs %s: not injected: %v", time.Since(start).Seconds(), f.Kind, err)
		return a
	}
	c.logf("    +%3.0fs injected %s", time.Since(start).Seconds(), f.Target())
	select {
	case <-ctx.Done():
	case <-time.After(f.Hold):
	}
	if err := retry(ctx, 2*time.Minute, u); err != nil {
		a.Error = "undo: " + err.Error()
		c.logf("    +%3.0fs %s: undo failed: %v (the end of the run clears it)", time.Since(start).Seconds(), f.Kind, err)
	}
	a.Undone = time.Now()
	return a
}

func retry(ctx context.Context, d time.Duration, fn func(context.Context) error) error {
	deadline := time.Now().Add(d)
	for {
		err := fn(ctx)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// clearAll is the safety net after the fault window: every process of the
// lab running, every forwarder open, capacity restored on every member,
// the policies as written and the manager running.
func (c *Campaign) clearAll(ctx context.Context, tr *Truth) error {
	st, err := c.lab.State()
	if err != nil {
		return err
	}
	var errs []error
	for _, cs := range st.Clusters {
		for _, comp := range []string{lab.CompEtcd, lab.CompAPIServer} {
			if p := st.Proc(cs.Name + "/" + comp); p != nil && lab.ProcessState(p.PID) == lab.ProcGone {
				start := c.lab.RestartAPIServer
				if comp == lab.CompEtcd {
					start = c.lab.StartEtcd
				}
				errs = append(errs, start(ctx, cs.Name))
			}
		}
		if !c.iso.Forwarded(c.addr[cs.Name]) {
			errs = append(errs, c.iso.Forward(c.addr[cs.Name]))
		}
		if cs.Role != lab.RoleMember {
			continue
		}
		for _, n := range cs.Nodes {
			p := st.Proc(cs.Name + "/" + lab.CompKwok + "/" + n.Name)
			if p == nil || lab.ProcessState(p.PID) != lab.ProcRunning || n.Evidence != "" {
				tr.Open(keyAlive+n.Name, time.Now())
				tr.Close(keyFrozen+n.Name, time.Now())
				err := c.fence.powerOn(ctx, tr, cs.Name, n.Name, func(ctx context.Context) error { return c.lab.Restore(ctx, n.Name) })
				if err == nil {
					tr.Close(keyEvidence+n.Name, time.Now())
				}
				errs = append(errs, err)
			}
		}
		errs = append(errs, c.lab.RestoreCapacity(ctx, cs.Name))
	}
	if err := c.resetPolicy(ctx, livePolicy); err != nil {
		errs = append(errs, err)
	} else {
		tr.Close(keyNoWrites, time.Now())
	}
	errs = append(errs, c.startManager(tr))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clearing the faults: %w", err)
	}
	return nil
}
