package capacity

import (
	"encoding/json"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/fedfailover/fedfailover/internal/cachedpod"
)

// Usage is what a member's pods take on each of its nodes, kept up to date
// from the pod informer's events, so an estimate costs a walk over the
// nodes and not over every pod on each pass (at 2,000 nodes and 20,000 pods, 71 ms
// and 18.7 MB of allocation per estimate, against 9 ms and 1.4 MB:
// BenchmarkFitGoalMember, BenchmarkUsageFitGoalMember). An informer hands every handler
// the object it last handed it as an update's old object and a delete's
// object, so subtracting what was added keeps the sums exact.
//
// It also remembers the estimates it made (Estimate) until the next change
// an estimate reads: every RSP of a member is planned each resync, and
// RSPs whose templates ask the same of a node get the same answer, so
// without it each pass walked every node of every member again (at the
// scale goal, a third of the manager's CPU at rest).
type Usage struct {
	mu     sync.RWMutex
	byNode map[string]*nodeUsage
	// generation counts the changes an estimate reads: a pod taking or
	// freeing room, a node's fit facts (NodeFitChanged).
	generation uint64
	// estimates are those made at memoGeneration, by template (templateKey).
	estimates      map[string]Estimate
	memoGeneration uint64
}

// maxEstimates bounds the remembered estimates: beyond it (more distinct
// templates than that planned between two changes), they are made again.
const maxEstimates = 1024

// NewUsage is an empty Usage: no pod takes room anywhere.
func NewUsage() *Usage { return &Usage{byNode: map[string]*nodeUsage{}} }

// Add counts a pod that appeared.
func (u *Usage) Add(p *cachedpod.Pod) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if holdsRoom(p.NodeName, p.Phase) {
		u.generation++
	}
	addPod(u.byNode, p.NodeName, p.Phase, p.RequestList())
}

// Update replaces a pod's old state by its new one.
func (u *Usage) Update(oldPod, newPod *cachedpod.Pod) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if sameRoom(oldPod, newPod) {
		// A status change (conditions, Pending to Running): nothing an
		// estimate reads changed, so the remembered ones stay.
		return
	}
	u.generation++
	u.removeLocked(oldPod)
	addPod(u.byNode, newPod.NodeName, newPod.Phase, newPod.RequestList())
}

// sameRoom: both versions of a pod take the same room on the same node.
func sameRoom(a, b *cachedpod.Pod) bool {
	held := holdsRoom(a.NodeName, a.Phase)
	if held != holdsRoom(b.NodeName, b.Phase) {
		return false
	}
	if !held {
		return true
	}
	return a.NodeName == b.NodeName && equality.Semantic.DeepEqual(a.RequestList(), b.RequestList())
}

// Delete uncounts a pod that went.
func (u *Usage) Delete(p *cachedpod.Pod) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if holdsRoom(p.NodeName, p.Phase) {
		u.generation++
	}
	u.removeLocked(p)
}

// NodesChanged forgets the remembered estimates: a node came, went, or
// changed what an estimate reads of it (NodeFitChanged). The member cache's
// node informer calls it after its store holds the change, and so does
// every watcher's Node handler before it queues a pass (member.Cache.Watch),
// since informer handlers run apart: a pass queued on a node change never
// gets the estimate of before it. (A pass queued by a pod event can still
// get the pod sums of before that event: the next event or resync makes
// them again.)
func (u *Usage) NodesChanged() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.generation++
}

func (u *Usage) removeLocked(p *cachedpod.Pod) {
	if !holdsRoom(p.NodeName, p.Phase) {
		return
	}
	n := u.byNode[p.NodeName]
	if n == nil {
		return
	}
	n.pods--
	n.sub(p.RequestList())
	if n.pods <= 0 {
		// Nothing left on the node (a node that went must not stay here).
		delete(u.byNode, p.NodeName)
	}
}

// Estimate is Fit for spec over the nodes listNodes returns, remembered
// until the next change an estimate reads (pods taking or freeing room,
// NodesChanged), and shared by every spec that asks the same of a node
// (templateKey). listNodes is called only when the estimate is made. The
// Estimate's maps are shared: read them, never change them.
func (u *Usage) Estimate(spec *corev1.PodSpec, listNodes func() ([]*corev1.Node, error)) (Estimate, error) {
	key, keyed := templateKey(spec)
	u.mu.RLock()
	generation := u.generation
	est, ok := u.estimates[key]
	ok = ok && keyed && u.memoGeneration == generation
	u.mu.RUnlock()
	if ok {
		return est, nil
	}
	nodes, err := listNodes()
	if err != nil {
		return Estimate{}, err
	}
	u.mu.RLock()
	est = fit(nodes, u.byNode, spec)
	unchanged := u.generation == generation
	u.mu.RUnlock()
	// Remembered only if nothing changed since the nodes were listed: a
	// change in between may be missing from them.
	if keyed && unchanged {
		u.mu.Lock()
		if u.generation == generation {
			if u.estimates == nil || u.memoGeneration != generation || len(u.estimates) >= maxEstimates {
				u.estimates, u.memoGeneration = map[string]Estimate{}, generation
			}
			u.estimates[key] = est
		}
		u.mu.Unlock()
	}
	return est, nil
}

// templateKey is what fit reads of a pod spec: its effective requests,
// tolerations, nodeSelector and required node affinity. Specs with the
// same key get the same estimate; a spec without one (not reachable for
// these types) is estimated every time.
func templateKey(spec *corev1.PodSpec) (string, bool) {
	if spec == nil {
		spec = &corev1.PodSpec{}
	}
	k := struct {
		Requests     corev1.ResourceList  `json:"r,omitempty"`
		Tolerations  []corev1.Toleration  `json:"t,omitempty"`
		NodeSelector map[string]string    `json:"s,omitempty"`
		Required     *corev1.NodeSelector `json:"a,omitempty"`
	}{Requests: PodRequests(spec), Tolerations: spec.Tolerations, NodeSelector: spec.NodeSelector}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil {
		k.Required = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	b, err := json.Marshal(k)
	return string(b), err == nil
}

// Fit is the package's Fit with the pods this Usage has counted. It takes
// the Nodes by pointer, so a caller can pass a member cache's own Nodes
// without copying them.
func (u *Usage) Fit(nodes []*corev1.Node, spec *corev1.PodSpec) Estimate {
	u.mu.RLock()
	defer u.mu.RUnlock()
	return fit(nodes, u.byNode, spec)
}
