package noderecovery

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// podScope decides which pods node recovery force-deletes and tracks.
type podScope struct {
	namespaces map[string]bool // nil: every namespace
	pods       labels.Selector
}

// newPodScope resolves a PodScope; a namespaceSelector is resolved against
// the member's Namespaces (read live: they are not cached).
func newPodScope(ctx context.Context, r client.Reader, s v1alpha1.PodScope) (podScope, error) {
	out := podScope{pods: labels.Everything()}
	if s.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(s.Selector)
		if err != nil {
			return out, fmt.Errorf("pods.selector: %w", err)
		}
		out.pods = sel
	}
	switch {
	case len(s.Namespaces) > 0:
		out.namespaces = map[string]bool{}
		for _, ns := range s.Namespaces {
			out.namespaces[ns] = true
		}
	case s.NamespaceSelector != nil:
		sel, err := metav1.LabelSelectorAsSelector(s.NamespaceSelector)
		if err != nil {
			return out, fmt.Errorf("pods.namespaceSelector: %w", err)
		}
		var list corev1.NamespaceList
		if err := r.List(ctx, &list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return out, fmt.Errorf("listing namespaces: %w", err)
		}
		out.namespaces = map[string]bool{}
		for _, ns := range list.Items {
			out.namespaces[ns.Name] = true
		}
	}
	return out, nil
}

func (s podScope) matches(p *corev1.Pod) bool {
	if s.namespaces != nil && !s.namespaces[p.Namespace] {
		return false
	}
	return s.pods == nil || s.pods.Matches(labels.Set(p.Labels))
}

// podClaims returns the namespace/name of every claim a pod mounts
// (ephemeral volumes' claims are named <pod>-<volume>).
func podClaims(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, p.Namespace+"/"+v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			out = append(out, p.Namespace+"/"+p.Name+"-"+v.Name)
		}
	}
	return out
}

// claimsOf lists, sorted and unique, the claims of pods.
func claimsOf(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, podClaims(p)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
