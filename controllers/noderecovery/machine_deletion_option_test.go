package noderecovery

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// Machine deletion is an installation choice: a policy asking for it in an
// installation that does not grant it deletes nothing and says why.
func TestMachineDeletionNeedsTheInstallationOption(t *testing.T) {
	lostAt := t0.Add(-time.Minute)
	in := planInput{Node: node(corev1.ConditionUnknown, lostAt, nil), Machine: livingMachine(), Now: t0,
		Sighting: seen(corev1.ConditionUnknown, lostAt, lostAt),
		Policy:   policy(func(p *v1alpha1.NodeRecoverySpec) { p.Fencing.RequestMachineDeletion = true })}

	p := decide(in)
	if p.Step == stepDeleteMachine {
		t.Fatal("Machine deletion planned although the installation does not enable it")
	}
	if p.Phase != v1alpha1.RecoveryPhaseBlocked {
		t.Errorf("phase %q, want %q", p.Phase, v1alpha1.RecoveryPhaseBlocked)
	}
	const want = "Machine deletion is not enabled in this installation (--enable-machine-deletion)"
	if !strings.Contains(p.Message, want) {
		t.Errorf("message %q does not say %q", p.Message, want)
	}

	in.MachineDeletionEnabled = true
	if p := decide(in); p.Step != stepDeleteMachine || strings.Contains(p.Message, want) {
		t.Errorf("enabled: step %q, message %q; want %q without the disabled note", p.Step, p.Message, stepDeleteMachine)
	}
}
