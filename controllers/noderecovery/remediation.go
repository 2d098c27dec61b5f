package noderecovery

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// machineOwner says who already remediates m, if anyone: fedfailover must not
// delete a Machine that a MachineHealthCheck or an external remediation
// handles, or the two would race (and double the replacements).
func machineOwner(m *clusterv1.Machine, mhcs []clusterv1.MachineHealthCheck) string {
	if m == nil {
		return ""
	}
	if why := remediationPaused(m); why != "" {
		return why
	}
	if _, ok := m.Annotations[clusterv1.RemediateMachineAnnotation]; ok {
		return "annotation " + clusterv1.RemediateMachineAnnotation
	}
	// Cluster API sets these conditions only on Machines an MHC targets.
	for _, t := range []string{clusterv1.MachineOwnerRemediatedCondition, clusterv1.MachineHealthCheckSucceededCondition} {
		if meta.FindStatusCondition(m.Status.Conditions, t) != nil {
			return "MachineHealthCheck (condition " + t + ")"
		}
	}
	for _, ref := range m.OwnerReferences {
		if ref.Kind == "MachineHealthCheck" || isRemediationKind(ref.Kind) {
			return fmt.Sprintf("%s %s (owner reference)", ref.Kind, ref.Name)
		}
	}
	for i := range mhcs {
		h := &mhcs[i]
		if h.Namespace != m.Namespace || h.Spec.ClusterName != m.Spec.ClusterName {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&h.Spec.Selector)
		if err != nil || sel.Empty() {
			// An unparsable selector: assume it might target the Machine.
			if err != nil {
				return "MachineHealthCheck " + h.Name + " (selector unreadable)"
			}
			continue // CAPI ignores MHCs with an empty selector
		}
		if sel.Matches(labels.Set(m.Labels)) {
			return "MachineHealthCheck " + h.Name
		}
	}
	return ""
}

// isRemediationKind matches external remediation objects by the naming
// convention of Cluster API's remediation contract (e.g. Metal3Remediation).
func isRemediationKind(kind string) bool {
	const suffix = "Remediation"
	return len(kind) > len(suffix) && kind[len(kind)-len(suffix):] == suffix
}

// remediationPaused says why Cluster API asks that nobody remediate m now:
// the Machine (or, through the Paused condition CAPI sets on every object of
// a paused Cluster, its Cluster) is paused, or the Machine opts out of
// remediation.
func remediationPaused(m *clusterv1.Machine) string {
	if _, ok := m.Annotations[clusterv1.PausedAnnotation]; ok {
		return "no remediation wanted: annotation " + clusterv1.PausedAnnotation + " (Machine paused)"
	}
	if _, ok := m.Annotations[clusterv1.MachineSkipRemediationAnnotation]; ok {
		return "no remediation wanted: annotation " + clusterv1.MachineSkipRemediationAnnotation
	}
	if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.PausedCondition); c != nil && c.Status == metav1.ConditionTrue {
		return "no remediation wanted: condition " + clusterv1.PausedCondition + "=True (Machine or Cluster paused)"
	}
	return ""
}
