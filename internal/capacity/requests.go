package capacity

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// PodRequests is what the scheduler reserves for a pod with this spec: the
// larger of (app containers + sidecars) and the largest init container
// (plus the sidecars started before it), per resource; pod-level requests
// replace the container sum for the resources they name; overhead is added.
// It reads the spec only (an in-place resize in progress is not seen).
func PodRequests(spec *corev1.PodSpec) corev1.ResourceList {
	total := corev1.ResourceList{}
	if spec == nil {
		return total
	}
	for i := range spec.Containers {
		addList(total, spec.Containers[i].Resources.Requests)
	}
	sidecars, initPeak := initRequests(spec.InitContainers)
	addList(total, sidecars)
	maxList(total, initPeak)
	if spec.Resources != nil {
		for name, q := range spec.Resources.Requests {
			total[name] = q.DeepCopy()
		}
	}
	addList(total, spec.Overhead)
	return total
}

// initRequests returns the sum of sidecar (restartable init) containers and
// the peak while running the init containers one after another.
func initRequests(inits []corev1.Container) (sidecars, peak corev1.ResourceList) {
	sidecars, peak = corev1.ResourceList{}, corev1.ResourceList{}
	for i := range inits {
		c := &inits[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addList(sidecars, c.Resources.Requests)
			maxList(peak, sidecars)
			continue
		}
		running := corev1.ResourceList{}
		addList(running, sidecars)
		addList(running, c.Resources.Requests)
		maxList(peak, running)
	}
	return sidecars, peak
}

func addList(into, add corev1.ResourceList) {
	for name, q := range add {
		sum := into[name]
		sum.Add(q)
		into[name] = sum
	}
}

func maxList(into, other corev1.ResourceList) {
	for name, q := range other {
		if cur, ok := into[name]; !ok || q.Cmp(cur) > 0 {
			into[name] = q.DeepCopy()
		}
	}
}

// amount is the integer the fit arithmetic uses: millicores for CPU (so
// 100m counts), whole units (rounded up) for everything else.
func amount(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}
