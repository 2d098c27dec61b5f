package lab

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func indexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// ScaleLabel marks the scale benchmark's bulk pods (CreateStaticPods): the
// lab's attacher leaves them out of its lists (they never wait for it).
const ScaleLabel = "lab.fedfailover.io/scale"

func scalePod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels: map[string]string{"app": "bench", "bench.fedfailover.io/node": node, ScaleLabel: "true"},
		},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "app", Image: PauseImage,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("10m"),
					corev1.ResourceMemory: resource.MustParse("16Mi"),
				}},
			}},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		},
	}
}

// FederatedDeploymentsYAML is one namespace (and its FederatedNamespace)
// holding count FederatedDeployments named <prefix>-<i>, each with an RSP
// spreading total replicas over members with equal weights.
func FederatedDeploymentsYAML(ns, prefix string, count, total int, members []string) string {
	docs := []string{}
	for i := 0; i < count; i++ {
		all := FederatedDeploymentYAML(ns, fmt.Sprintf("%s-%d", prefix, i), total, members)
		parts := strings.Split(all, "\n---\n")
		if i > 0 {
			parts = parts[2:] // the namespace and its FederatedNamespace once
		}
		docs = append(docs, parts...)
	}
	return strings.Join(docs, "\n---\n")
}

// CreateObjectsYAML creates the objects of a multi-document YAML on
// cluster, workers at a time; objects that exist already are kept. Unlike
// ApplyYAML it suits thousands of objects.
func (l *Lab) CreateObjectsYAML(ctx context.Context, cluster, doc string, workers int) error {
	cl, err := l.Client(cluster)
	if err != nil {
		return err
	}
	var objs []*unstructured.Unstructured
	for _, part := range strings.Split(doc, "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(part), &u.Object); err != nil {
			return err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	// Namespaces first: everything else lives in one.
	var first, rest []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() == "Namespace" {
			first = append(first, u)
		} else {
			rest = append(rest, u)
		}
	}
	for _, batch := range [][]*unstructured.Unstructured{first, rest} {
		err := forEachParallel(ctx, batch, workers, func(ctx context.Context, u *unstructured.Unstructured) error {
			if err := cl.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
