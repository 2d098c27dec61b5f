package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/test/lab"
	"github.com/fedfailover/fedfailover/test/lab/fenceagent"
)

// The live policy's remediation: the lab's fence agent (test/lab/fenceagent),
// run by the campaign, answers every remediation fedfailover requests for a
// node lost without evidence (a partition, a power-off without evidence).
const (
	fenceNamespace = "chaos-fence"
	fenceTemplate  = "chaos"
	// remediationTimeout is the live policy's remediation timeout.
	remediationTimeout = 30 * time.Second
	// remediationDelay is how long the agent takes to power a node off,
	// unless a partition plays RemediateSlow.
	remediationDelay = 2 * time.Second
	// slowRemediationDelay is past remediationTimeout: fedfailover gives
	// up (TimedOut, Blocked) before the agent powers the node off.
	slowRemediationDelay = remediationTimeout + 10*time.Second
	// rebootAfter is how long a node the agent powers off after the faults
	// were undone stays off before the campaign powers it on, as a fence
	// agent's reboot (or an operator) would: long enough for fedfailover
	// to act on the fence and the replacements to run elsewhere.
	rebootAfter = 30 * time.Second
)

// remediationKindFlag is the manager's flag that lets it create the lab's
// remediations.
const remediationKindFlag = "--remediation-kind=LabRemediation.v1alpha1.lab.fedfailover.io"

// fence is the campaign's fence agent and the ground truth of what it did:
// a node it powers off is dead (no longer alive, no longer frozen) and
// fenced from the moment the kill returned, until it is powered on again.
// Its lock orders the agent's kills against the campaign's power-ons of
// the same node.
type fence struct {
	c  *Campaign
	mu sync.Mutex
	tr *Truth // the current run's
	// plays is the outcome a partitioned node's remediation plays (its
	// partition's Fault.Remediation), kept for the run: a remediation
	// still pending after the partition healed plays it too, as a real
	// agent's would.
	plays map[string]string
	// faultsUndone: the run's faults are undone; a node powered off from
	// then on is in offAfter (its member, when), for rebootFenced.
	faultsUndone bool
	offAfter     map[string]offNode
}

type offNode struct {
	cluster string
	at      time.Time
}

// startFence installs the agent's template and runs the agent until ctx
// ends.
func (c *Campaign) startFence(ctx context.Context) error {
	if err := c.host.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fenceNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	tmpl := fenceagent.Template(fenceNamespace, fenceTemplate, remediationDelay, fenceagent.ModePowerOff)
	if err := c.host.Create(ctx, tmpl); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("creating the fence agent's template: %w", err)
	}
	c.fence = &fence{c: c, plays: map[string]string{}}
	agent := fenceagent.New(c.host, fenceagent.Options{Namespace: fenceNamespace, PowerOff: c.fence.powerOff, ForNode: c.fence.settings})
	go agent.Run(ctx)
	return nil
}

// startRun points the ground truth at the run's timeline and forgets the
// last run's outcomes.
func (f *fence) startRun(tr *Truth) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tr, f.plays = tr, map[string]string{}
	f.faultsUndone, f.offAfter = false, map[string]offNode{}
}

// undone marks the run's faults undone: nodes the agent powers off from now
// on are powered on again by rebootFenced, since nothing else would.
func (f *fence) undone() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faultsUndone = true
}

// rebootFenced powers on each node the agent powered off after the faults
// were undone, rebootAfter after its power-off.
func (f *fence) rebootFenced(ctx context.Context, tr *Truth) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for node, off := range f.offAfter {
		if time.Since(off.at) < rebootAfter {
			continue
		}
		delete(f.offAfter, node)
		if gone, err := f.c.lab.NodeProcessGone(node); err != nil || !gone {
			errs = append(errs, err) // powered on already (clearAll)
			continue
		}
		f.c.logf("    powering on %s, fenced by the agent %.0fs ago after the faults were undone", node, time.Since(off.at).Seconds())
		errs = append(errs, f.powerOnLocked(ctx, tr, off.cluster, node, func(ctx context.Context) error { return f.c.lab.Restore(ctx, node) }))
	}
	return errors.Join(errs...)
}

// play sets the outcome of node's remediations.
func (f *fence) play(node, outcome string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plays[node] = outcome
}

// settings is the agent's ForNode: a node's drawn outcome.
func (f *fence) settings(_, node string) (time.Duration, string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch f.plays[node] {
	case RemediatePowerOff:
		return remediationDelay, fenceagent.ModePowerOff, true
	case RemediateFail:
		return remediationDelay, fenceagent.ModeFail, true
	case RemediateSlow:
		return slowRemediationDelay, fenceagent.ModePowerOff, true
	}
	return 0, "", false
}

// powerOff is the agent's PowerOff: a node whose kwok is gone already is
// reported off as it is (its Machine evidence, if any, untouched); a
// running or frozen one is killed. Either way the truth counts it fenced
// once the kill has returned.
func (f *fence) powerOff(ctx context.Context, cluster, node string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tr == nil {
		return fmt.Errorf("no run in progress: the campaign has no truth to record the power-off in")
	}
	gone, err := f.c.lab.NodeProcessGone(node)
	if err != nil {
		return err
	}
	if !gone {
		f.tr.Open(keyFault+cluster, time.Now())
		if err := f.c.lab.PowerOff(ctx, node, lab.EvidenceNone); err != nil {
			return err
		}
		at := time.Now()
		f.tr.Close(keyAlive+node, at)
		f.tr.Close(keyFrozen+node, at)
		f.c.logf("    fence agent: powered off %s", node)
	} else {
		f.c.logf("    fence agent: %s was off already", node)
	}
	f.tr.Open(keyFenced+node, time.Now())
	if f.faultsUndone {
		f.offAfter[node] = offNode{cluster: cluster, at: time.Now()}
	}
	return nil
}

// endPartition heals a partitioned node, or powers it on when the agent
// powered it off meanwhile.
func (f *fence) endPartition(ctx context.Context, tr *Truth, cluster, node string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	gone, err := f.c.lab.NodeProcessGone(node)
	if err != nil {
		return err
	}
	if !gone {
		tr.Close(keyFrozen+node, time.Now()) // before it may run again
		return f.c.lab.Heal(node)
	}
	return f.powerOnLocked(ctx, tr, cluster, node, func(ctx context.Context) error { return f.c.lab.Restore(ctx, node) })
}

// powerOn runs on (a power-on or a replacement of node) under the lock,
// with the truth's spans: fenced no more from before it starts, alive from
// the new process's start (taken before its exec).
func (f *fence) powerOn(ctx context.Context, tr *Truth, cluster, node string, on func(context.Context) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.powerOnLocked(ctx, tr, cluster, node, on)
}

func (f *fence) powerOnLocked(ctx context.Context, tr *Truth, cluster, node string, on func(context.Context) error) error {
	before := time.Now()
	tr.Close(keyFenced+node, before)
	err := on(ctx)
	// Before the new process, nothing of the node runs: the lab reports
	// the power on, or creates the replacement Machine, first.
	started, serr := f.c.kwokStarted(cluster, node)
	if serr != nil || started.Before(before) {
		started = time.Now() // not started by this power-on (it failed): from now on, to be safe
	}
	tr.Open(keyAlive+node, started)
	return err
}
