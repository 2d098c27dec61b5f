package noderecovery

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	fpolicy "github.com/fedfailover/fedfailover/internal/policy"
)

// podScope decides which pods node recovery force-deletes and tracks.
type podScope struct {
	scope fpolicy.Scope
	// nsLabels holds the labels of the namespaces a namespaceSelector
	// selects (nil without one).
	nsLabels map[string]map[string]string
}

// newPodScope resolves spec.nodeRecovery.pods; a namespaceSelector is
// resolved against the member's Namespaces (read live: they are not cached).
func newPodScope(ctx context.Context, r client.Reader, nr *v1alpha1.NodeRecoverySpec) (podScope, error) {
	s, err := fpolicy.PodScope(nr)
	if err != nil {
		return podScope{}, err
	}
	out := podScope{scope: s}
	if sel := s.NamespaceSelector(); sel != nil {
		var list corev1.NamespaceList
		if err := r.List(ctx, &list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return out, fmt.Errorf("listing namespaces: %w", err)
		}
		out.nsLabels = map[string]map[string]string{}
		for _, ns := range list.Items {
			out.nsLabels[ns.Name] = ns.Labels
		}
	}
	return out, nil
}

func (s podScope) matches(p *corev1.Pod) bool {
	o := fpolicy.Object{Labels: p.Labels, Namespace: p.Namespace}
	if s.nsLabels != nil {
		l, ok := s.nsLabels[p.Namespace]
		if !ok {
			return false // the member did not list it as selected
		}
		o.NamespaceLabels = l
	}
	return s.scope.Matches(o)
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
