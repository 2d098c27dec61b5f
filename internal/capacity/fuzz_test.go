package capacity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// FuzzFit checks that the estimate is never negative, never above the free
// pod slots, and never grows when one more pod is bound to a node.
func FuzzFit(f *testing.F) {
	f.Add(uint16(4000), uint16(8), uint8(110), uint16(1000), uint16(1), uint16(500), uint8(3), uint8(0))
	f.Add(uint16(0), uint16(0), uint8(0), uint16(0), uint16(0), uint16(0), uint8(0), uint8(0xff))
	f.Add(uint16(100), uint16(1), uint8(2), uint16(3000), uint16(9), uint16(0), uint8(7), uint8(0x55))
	f.Fuzz(func(t *testing.T, cpuMilli, memGi uint16, podSlots uint8, reqMilli, reqGi, usedMilli uint16, usedPods, flags uint8) {
		var nodes []corev1.Node
		var pods []corev1.Pod
		for i, name := range []string{"n1", "n2", "n3"} {
			n := mkNode(name, resource.NewMilliQuantity(int64(cpuMilli)*int64(i+1), resource.DecimalSI).String(),
				resource.NewQuantity(int64(memGi)<<30, resource.BinarySI).String(), int64(podSlots))
			if flags>>i&1 != 0 {
				notReady(&n)
			}
			if flags>>(i+3)&1 != 0 {
				tainted("t", corev1.TaintEffectNoSchedule)(&n)
			}
			nodes = append(nodes, n)
			for j := 0; j < int(usedPods%8); j++ {
				pods = append(pods, boundPod(name, corev1.PodRunning, resource.NewMilliQuantity(int64(usedMilli), resource.DecimalSI).String(), "1Mi"))
			}
		}
		spec := template(resource.NewMilliQuantity(int64(reqMilli), resource.DecimalSI).String(), resource.NewQuantity(int64(reqGi)<<28, resource.BinarySI).String())
		if flags>>6&1 != 0 {
			spec.Tolerations = []corev1.Toleration{{Key: "t", Operator: corev1.TolerationOpExists}}
		}
		got := Fit(nodes, pods, spec)
		slots := got.Free[corev1.ResourcePods]
		if got.Replicas < 0 || got.Replicas > slots.Value() {
			t.Fatalf("replicas %d outside [0, %d free pod slots]", got.Replicas, slots.Value())
		}
		more := append(pods, boundPod("n1", corev1.PodRunning, resource.NewMilliQuantity(int64(usedMilli), resource.DecimalSI).String(), "1Mi"))
		if after := Fit(nodes, more, spec); after.Replicas > got.Replicas {
			t.Fatalf("binding a pod raised the estimate from %d to %d", got.Replicas, after.Replicas)
		}
	})
}
