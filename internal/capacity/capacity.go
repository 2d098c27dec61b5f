// Package capacity estimates, without any client, how many more replicas of
// a pod template a member cluster can run, from its Nodes and Pods.
package capacity

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Estimate is how much room a member has for one pod template.
type Estimate struct {
	// Replicas is how many more pods of the template fit.
	Replicas int64
	// EligibleNodes counts nodes the template may be scheduled on.
	EligibleNodes int
	// Free is allocatable minus requests of non-terminal pods, summed over
	// eligible nodes, per resource ("pods" is the free pod count): for the
	// fedfailover_member_free_capacity metric.
	Free corev1.ResourceList
	// Ineligible counts nodes left out, by reason (NotReady, Taint ..., ...).
	Ineligible map[string]int
}

// Fit estimates how many more pods with this spec fit on nodes, given the
// pods already bound to them. Pods that are Succeeded or Failed hold no
// resources; terminating pods still do, as for the scheduler.
func Fit(nodes []corev1.Node, pods []corev1.Pod, spec *corev1.PodSpec) Estimate {
	ptrs := make([]*corev1.Node, len(nodes))
	for i := range nodes {
		ptrs[i] = &nodes[i]
	}
	return fit(ptrs, boundPods(pods), spec)
}

// fit is Fit with the pods already summed per node.
func fit(nodes []*corev1.Node, byNode map[string]*nodeUsage, spec *corev1.PodSpec) Estimate {
	if spec == nil {
		spec = &corev1.PodSpec{}
	}
	want := PodRequests(spec)
	est := Estimate{Free: corev1.ResourceList{}, Ineligible: map[string]int{}}
	for _, node := range nodes {
		if ok, why := Eligible(node, spec); !ok {
			est.Ineligible[why]++
			continue
		}
		est.EligibleNodes++
		free := freeOn(node, byNode[node.Name])
		addList(est.Free, free)
		est.Replicas = saturatingAdd(est.Replicas, replicasIn(free, want))
	}
	return est
}

// nodeUsage is what the pods bound to one node take. Their requests are a
// short list, not a ResourceList: a node's pods request two or three
// resources, and a map of them costs about 600 B more per node, kept for
// every node of every member.
type nodeUsage struct {
	pods     int64
	requests []resourceSum
}

// resourceSum is the sum of one resource's requests.
type resourceSum struct {
	name corev1.ResourceName
	sum  resource.Quantity
}

// at is the sum for name, added (zero) if missing.
func (u *nodeUsage) at(name corev1.ResourceName) *resource.Quantity {
	for i := range u.requests {
		if u.requests[i].name == name {
			return &u.requests[i].sum
		}
	}
	u.requests = append(u.requests, resourceSum{name: name})
	return &u.requests[len(u.requests)-1].sum
}

// requested is the sum for name, if any pod requested it.
func (u *nodeUsage) requested(name corev1.ResourceName) (resource.Quantity, bool) {
	for i := range u.requests {
		if u.requests[i].name == name {
			return u.requests[i].sum, true
		}
	}
	return resource.Quantity{}, false
}

func (u *nodeUsage) add(l corev1.ResourceList) {
	for name, q := range l {
		u.at(name).Add(q)
	}
}

func (u *nodeUsage) sub(l corev1.ResourceList) {
	for name, q := range l {
		u.at(name).Sub(q)
	}
}

func boundPods(pods []corev1.Pod) map[string]*nodeUsage {
	byNode := map[string]*nodeUsage{}
	for i := range pods {
		p := &pods[i]
		addPod(byNode, p.Spec.NodeName, p.Status.Phase, PodRequests(&p.Spec))
	}
	return byNode
}

// holdsRoom: the pod is bound and not finished, so the scheduler counts it
// on its node.
func holdsRoom(node string, phase corev1.PodPhase) bool {
	return node != "" && phase != corev1.PodSucceeded && phase != corev1.PodFailed
}

// addPod counts a pod bound to node, in phase, with those requests.
func addPod(byNode map[string]*nodeUsage, node string, phase corev1.PodPhase, requests corev1.ResourceList) {
	if !holdsRoom(node, phase) {
		return
	}
	u := byNode[node]
	if u == nil {
		u = &nodeUsage{}
		byNode[node] = u
	}
	u.pods++
	u.add(requests)
}

// freeOn is allocatable minus usage, never negative. A node without a pods
// allocatable has room for no pod, as for the scheduler.
func freeOn(node *corev1.Node, usage *nodeUsage) corev1.ResourceList {
	if usage == nil {
		usage = &nodeUsage{}
	}
	free := corev1.ResourceList{}
	for name, alloc := range node.Status.Allocatable {
		left := alloc.DeepCopy()
		if name == corev1.ResourcePods {
			left.Sub(*resource.NewQuantity(usage.pods, resource.DecimalSI))
		} else if used, ok := usage.requested(name); ok {
			left.Sub(used)
		}
		if left.Sign() < 0 {
			left = *resource.NewQuantity(0, alloc.Format)
		}
		free[name] = left
	}
	if _, ok := free[corev1.ResourcePods]; !ok {
		free[corev1.ResourcePods] = *resource.NewQuantity(0, resource.DecimalSI)
	}
	return free
}

// replicasIn is how many pods requesting want fit in free: the pod count,
// then every requested resource; one the node lacks allows none.
func replicasIn(free, want corev1.ResourceList) int64 {
	pods := free[corev1.ResourcePods]
	n := pods.Value()
	for name, q := range want {
		if name == corev1.ResourcePods {
			continue
		}
		need := amount(name, q)
		if need <= 0 {
			continue
		}
		have, ok := free[name]
		if !ok {
			return 0
		}
		n = min(n, amount(name, have)/need)
	}
	return max(n, 0)
}

func saturatingAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
