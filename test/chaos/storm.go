package chaos

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/fencing"
)

// A storm a member itself shows moves I4's bound.
//
// fedfailover's storm guard suspends node recovery in a member where more
// nodes are lost at once than maxUnhealthy allows, and keeps it suspended
// for stormCooldown after the storm ends (docs/safety.md): by design, it
// does nothing while that could be a network or control-plane failure. A
// member's own control plane can make such a storm after the faults are
// undone: an API server back from an outage finds every kubelet Lease
// stale, and its node-lifecycle controller marks every node not Ready
// until kwok renews them (seed 1003). The cooldown then ends later than a
// bound counted from the last fault.
//
// So I4's bound counts from the later of the last fault undone and the end
// of the cooldown of the last storm the checker saw itself, in its own
// reads of the member: nodes not Ready (in its samples) for the policy's
// notReadyFor, more of them than maxUnhealthy allows, by the rule
// fedfailover applies (fencing.Storm). A storm only fedfailover saw moves
// nothing, and I4 fails on the cooldown it causes.
type stormWatch struct {
	mu       sync.Mutex
	recovery v1alpha1.NodeRecoverySpec
	// nodes counts each member's nodes.
	nodes map[string]int
	// notReadySince is, per node, the first sample in a row that read it
	// not Ready.
	notReadySince map[string]time.Time
	// last is, per member, the last sample that showed it in a storm, and
	// what it showed.
	last map[string]stormSighting
}

type stormSighting struct {
	at       time.Time
	lost, of int
}

func newStormWatch(recovery v1alpha1.NodeRecoverySpec, top Topology) *stormWatch {
	nodes := map[string]int{}
	for m, ns := range top.Nodes {
		nodes[m] = len(ns)
	}
	return &stormWatch{recovery: recovery, nodes: nodes, notReadySince: map[string]time.Time{}, last: map[string]stormSighting{}}
}

// observe counts, in each member s could read, the nodes not Ready for
// notReadyFor in a row of samples.
func (w *stormWatch) observe(s Sample) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	lost := map[string]int{}
	for name, n := range s.Nodes {
		if n.Ready {
			delete(w.notReadySince, name)
			continue
		}
		since, ok := w.notReadySince[name]
		if !ok {
			since = s.Time
			w.notReadySince[name] = since
		}
		if s.Time.Sub(since) >= w.recovery.NotReadyFor.Get() {
			lost[n.Cluster]++
		}
	}
	for m, readable := range s.Readable {
		if readable && fencing.Storm(lost[m], w.nodes[m], w.recovery.MaxUnhealthy) {
			w.last[m] = stormSighting{at: s.Time, lost: lost[m], of: w.nodes[m]}
		}
	}
}

// heldUntil is when the cooldown of the last storm seen ends (zero when
// none was seen), and what was seen.
func (w *stormWatch) heldUntil() (time.Time, string) {
	if w == nil {
		return time.Time{}, ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var until time.Time
	var what []string
	for m, st := range w.last {
		end := st.at.Add(w.recovery.StormCooldown.Get())
		what = append(what, fmt.Sprintf("%s: %d of %d nodes not Ready for %s (maxUnhealthy allows %d) until %s, cooldown %s to %s",
			m, st.lost, st.of, w.recovery.NotReadyFor, fencing.MaxLost(st.of, w.recovery.MaxUnhealthy), st.at.Format("15:04:05"), w.recovery.StormCooldown, end.Format("15:04:05")))
		if end.After(until) {
			until = end
		}
	}
	sort.Strings(what)
	if len(what) == 0 {
		return until, ""
	}
	return until, fmt.Sprintf("storm seen by the checker (%s)", strings.Join(what, "; "))
}
