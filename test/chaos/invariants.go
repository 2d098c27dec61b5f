package chaos

import (
	"fmt"
	"slices"
	"time"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// Invariant names.
const (
	I1 = "I1" // no destructive act for a node whose process was alive or lately ran, or without evidence or a fence agent's power-off
	I2 = "I2" // no out-of-service taint left on a Ready node
	I3 = "I3" // never fewer Running replicas than kubefed alone could run, none moved off a healthy member
	I4 = "I4" // convergence after the last fault
	I5 = "I5" // no hot loops
)

// Invariants lists them in table order.
var Invariants = []string{I1, I2, I3, I4, I5}

// Bounds are the documented limits of the invariants (docs/chaos.md).
type Bounds struct {
	// TaintOnReadyNode: I2 fails when fedfailover's taint stays this long on
	// a node Ready for that long while fedfailover runs and reaches it.
	TaintOnReadyNode time.Duration `json:"taintOnReadyNode"`
	// KubeletSilence: I1 fails when a destructive act comes less than this
	// after the node's process last ran. fedfailover reads a Lease
	// unchanged over the silence window (5 s, the floor, for the lab's 8 s Lease)
	// before it acts, and the earliest loss, by evidence, starts no sooner
	// than the power-off; the bound leaves 1 s for the runner's truth,
	// which closes a process's life only once the power-off has returned.
	KubeletSilence time.Duration `json:"kubeletSilence"`
	// Settle: a member counts for I3's bound once no capacity fault has
	// touched it for this long (kubefed alone needs that to place again).
	Settle time.Duration `json:"settle"`
	// Short: I3 fails when a workload stays under its bound this long.
	Short time.Duration `json:"short"`
	// Converge bounds I4, from the end of the last fault or, when later,
	// of the cooldown of a storm the checker saw (storm.go).
	Converge time.Duration `json:"converge"`
	// WritesPerMember and WritesPerRSP bound I5: fedfailover's writes in any
	// 60 s to one member, and to one ReplicaSchedulingPreference.
	WritesPerMember int `json:"writesPerMemberPerMinute"`
	WritesPerRSP    int `json:"writesPerRSPPerMinute"`
}

// DefaultBounds are the bounds the campaign checks unless told otherwise.
func DefaultBounds() Bounds {
	return Bounds{TaintOnReadyNode: 60 * time.Second, KubeletSilence: 4 * time.Second, Settle: 60 * time.Second, Short: 30 * time.Second,
		Converge: 5 * time.Minute, WritesPerMember: 120, WritesPerRSP: 12}
}

// Violation is one broken invariant.
type Violation struct {
	Invariant string    `json:"invariant"`
	Time      time.Time `json:"time"`
	Message   string    `json:"message"`
}

func (v Violation) String() string {
	return fmt.Sprintf("%s at %s: %s", v.Invariant, v.Time.Format("15:04:05.000"), v.Message)
}

// NodeSample is a node as the checker read it from its member.
type NodeSample struct {
	Cluster string
	Ready   bool
	Tainted bool // carries the out-of-service taint
}

// Sample is one read of every member by the checker.
type Sample struct {
	Time time.Time
	// Readable: the member's API server answered this read.
	Readable map[string]bool
	// Nodes of the readable members, by name.
	Nodes map[string]NodeSample
	// Running is each workload's Running and Ready pods per readable member.
	Running map[string]map[string]int
	// KubefedReady: kubefed's KubeFedCluster Ready condition per member.
	KubefedReady map[string]bool
	// Pins is each workload's RSP pin per member (maxReplicas), absent
	// where the RSP does not cap the member; nil when the RSPs were not read.
	Pins map[string]map[string]int
}

// Checker evaluates I1, I2, I3 and I5 as acts and samples arrive.
type Checker struct {
	truth  *Truth
	bounds Bounds
	// baseline is each workload's replicas per member with no fault.
	baseline map[string]map[string]int

	taintedReady map[string]time.Time // node → first sample Ready with the taint
	short        map[string]time.Time // workload → first sample under its bound
	pins         map[string]map[string]int
	readyBefore  map[string]bool // kubefed Ready per member in the sample before
	writes       map[string][]time.Time
	reported     map[string]bool
	violations   []Violation
	// storms moves I4's bound (storm.go); nil watches nothing.
	storms *stormWatch
	// Acts are every destructive act seen, for the report.
	Acts []Act
	// Writes counts every write per target key, for the report.
	Writes map[string]int
}

// NewChecker checks against truth; baseline is per workload per member.
func NewChecker(truth *Truth, bounds Bounds, baseline map[string]map[string]int) *Checker {
	return &Checker{truth: truth, bounds: bounds, baseline: baseline, taintedReady: map[string]time.Time{},
		short: map[string]time.Time{}, pins: map[string]map[string]int{}, readyBefore: map[string]bool{}, writes: map[string][]time.Time{}, reported: map[string]bool{}, Writes: map[string]int{}}
}

// WatchStorms has the checker note storms in its samples by the storm
// guard's settings of recovery, for StormHeld; nil watches nothing.
func (c *Checker) WatchStorms(recovery *v1alpha1.NodeRecoverySpec, top Topology) {
	if recovery != nil {
		c.storms = newStormWatch(*recovery, top)
	}
}

// StormHeld is when the cooldown of the last storm the checker saw ends
// (zero if none), and what it saw. Safe to call while samples arrive.
func (c *Checker) StormHeld() (time.Time, string) { return c.storms.heldUntil() }

// Violations returns what was found so far.
func (c *Checker) Violations() []Violation { return slices.Clone(c.violations) }

// report records a violation once per key.
func (c *Checker) report(key, inv string, at time.Time, format string, args ...any) {
	if c.reported[key] {
		return
	}
	c.reported[key] = true
	c.violations = append(c.violations, Violation{Invariant: inv, Time: at, Message: fmt.Sprintf(format, args...)})
}

// Act checks one write of the operator: I1 for destructive ones, I5 for all.
func (c *Checker) Act(a Act) {
	if a.destructive() {
		c.Acts = append(c.Acts, a)
		c.checkProof(a)
	}
	key := "member/" + a.Cluster
	limit := c.bounds.WritesPerMember
	if a.Resource == "replicaschedulingpreferences" {
		key, limit = "rsp/"+a.Namespace+"/"+a.Name, c.bounds.WritesPerRSP
	} else if a.Cluster == hostCluster {
		key, limit = "host", 0
	}
	c.Writes[key]++
	if limit == 0 {
		return
	}
	w := append(c.writes[key], a.Time)
	for len(w) > 0 && a.Time.Sub(w[0]) > time.Minute {
		w = w[1:]
	}
	c.writes[key] = w
	if len(w) > limit {
		c.report("I5/"+key, I5, a.Time, "%d writes to %s within 60s (bound %d): last %s %s %s/%s",
			len(w), key, limit, a.Verb, a.Resource, a.Namespace, a.Name)
	}
}

// checkProof is I1 for one destructive act, against the lab's ground
// truth: the node's process was dead at the act (a partitioned node's is
// alive), and had not run for KubeletSilence before it (fedfailover found
// it lost on a Lease it read unchanged over the silence window, or later by
// its Ready condition; a partitioned process renews nothing) unless the
// fence agent had powered it off and said so (its success is the proof, so
// fedfailover may act at once; the truth opens the fenced span only once
// the kill has returned, so the process was dead at the act); and the
// node's Machine may carry the lab's power-off evidence, or the lab's fence
// agent powered it off (the live policy's two proofs: without one, nothing
// proves the node off, however it was found lost).
func (c *Checker) checkProof(a Act) {
	if a.Node == "" {
		return
	}
	key := fmt.Sprintf("I1/%s/%s/%s/%s", a.Kind, a.Namespace, a.Name, a.Time)
	what := fmt.Sprintf("%s %s %s/%s on %s/%s", a.Verb, a.Kind, a.Namespace, a.Name, a.Cluster, a.Node)
	switch {
	case c.truth.Alive(a.Node, a.Time):
		c.report(key, I1, a.Time, "%s while the node's kwok process was alive (running or partitioned)", what)
	case c.truth.RanWithin(a.Node, a.Time.Add(-c.bounds.KubeletSilence), a.Time) && !c.truth.Fenced(a.Node, a.Time):
		c.report(key, I1, a.Time, "%s less than %s after the node's kwok process last ran: no Lease read unchanged over the silence window proves that",
			what, c.bounds.KubeletSilence)
	case !c.truth.Evidence(a.Node, a.Time) && !c.truth.Fenced(a.Node, a.Time):
		c.report(key, I1, a.Time, "%s while the lab had written no power-off evidence on the node's Machine and its fence agent had not powered it off", what)
	}
}

// hostCluster names the host in acts.
const hostCluster = "host"

// Sample checks I2 and I3 on one read of the federation.
func (c *Checker) Sample(s Sample) {
	c.storms.observe(s)
	c.checkTaints(s)
	c.checkReplicas(s)
	c.checkMovedOff(s)
}

// checkMovedOff is I3's other half: replicas are never moved off a member
// kubefed sees Ready (in this sample and the one before) that no capacity
// fault has touched for Settle: an RSP pin of such a member newly lowered
// below its baseline share is a violation (a member cut from fedfailover
// alone is such a member: kubefed alone would keep its replicas there).
// Failback only raises pins; a make-before-break step lowers the pins of
// members above their share, never below it.
func (c *Checker) checkMovedOff(s Sample) {
	defer func() {
		for m, ok := range s.KubefedReady {
			c.readyBefore[m] = ok
		}
		for m := range c.readyBefore {
			if !s.KubefedReady[m] {
				c.readyBefore[m] = false
			}
		}
	}()
	if s.Pins == nil {
		return
	}
	for w, base := range c.baseline {
		now, before := s.Pins[w], c.pins[w]
		c.pins[w] = now
		if before == nil {
			continue
		}
		for m, share := range base {
			pin, capped := now[m]
			old, was := before[m]
			lowered := capped && pin < share && (!was || pin < old)
			if !lowered || !s.KubefedReady[m] || !c.readyBefore[m] {
				continue
			}
			since, ok := c.truth.Undisturbed(m, s.Time)
			if !ok || s.Time.Sub(since) < c.bounds.Settle {
				continue
			}
			c.report(fmt.Sprintf("I3/moved/%s/%s/%s", w, m, s.Time), I3, s.Time,
				"%s: replicas moved off %s (pin %d, was %s, baseline share %d) while kubefed sees it Ready and no capacity fault touched it for %.0fs",
				w, m, pin, pinString(old, was), share, s.Time.Sub(since).Seconds())
		}
	}
}

func pinString(n int, ok bool) string {
	if !ok {
		return "uncapped"
	}
	return fmt.Sprint(n)
}

// checkTaints is I2: a Ready node keeps fedfailover's taint at most
// TaintOnReadyNode while fedfailover runs and reaches its member.
func (c *Checker) checkTaints(s Sample) {
	for name, n := range s.Nodes {
		if !n.Ready || !n.Tainted {
			delete(c.taintedReady, name)
			continue
		}
		since, ok := c.taintedReady[name]
		if !ok {
			since = s.Time
			c.taintedReady[name] = since
		}
		reach, reaches := c.truth.Reaches(n.Cluster, s.Time)
		if !reaches {
			continue
		}
		if reach.After(since) {
			since = reach
		}
		if s.Time.Sub(since) > c.bounds.TaintOnReadyNode {
			c.report("I2/"+name+"/"+since.String(), I2, s.Time,
				"%s/%s Ready with the out-of-service taint for %.0fs while fedfailover runs and reaches %s (bound %s)",
				n.Cluster, name, s.Time.Sub(since).Seconds(), n.Cluster, c.bounds.TaintOnReadyNode)
		}
	}
}

// checkReplicas is I3. Kubefed alone keeps a workload's baseline share on
// every member it sees Ready; on a member no capacity fault has touched for
// Settle, those replicas run. So the bound is the sum of the baseline shares
// of those members, and the workload's Running replicas on all members must
// not stay under it for Short. A sample that cannot read every member only
// counts when what it read already meets the bound.
func (c *Checker) checkReplicas(s Sample) {
	for w, base := range c.baseline {
		bound := 0
		for m, n := range base {
			since, ok := c.truth.Undisturbed(m, s.Time)
			if s.KubefedReady[m] && ok && s.Time.Sub(since) >= c.bounds.Settle {
				bound += n
			}
		}
		running, complete := 0, true
		for m := range base {
			if !s.Readable[m] {
				complete = false
			}
			running += s.Running[w][m]
		}
		if running >= bound {
			delete(c.short, w)
			continue
		}
		if !complete {
			continue
		}
		since, ok := c.short[w]
		if !ok {
			c.short[w] = s.Time
			continue
		}
		if s.Time.Sub(since) > c.bounds.Short {
			c.report("I3/"+w+"/"+since.String(), I3, s.Time,
				"%s: %d Running replicas for %.0fs, kubefed alone keeps %d (members Ready to kubefed and undisturbed for %s: baseline %v, running %v)",
				w, running, s.Time.Sub(since).Seconds(), bound, c.bounds.Settle, base, s.Running[w])
		}
	}
}
