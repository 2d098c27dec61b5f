package fencing

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/nodecond"
)

var (
	fuzzStatuses = []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}
	fuzzReasons  = []string{
		clusterv1.MachineInfrastructureDeletedReason, clusterv1.MachineInfrastructureDoesNotExistReason,
		clusterv1.MachineInfrastructureReadyReason, clusterv1.MachineDeletingWaitingForInfrastructureDeletionReason,
		clusterv1.MachineDeletingWaitingForBootstrapDeletionReason, clusterv1.MachineDeletingDeletingNodeReason,
		clusterv1.MachineDeletingDeletionCompletedReason, "PoweredOff", "",
	}
	fuzzTypes = []string{clusterv1.MachineInfrastructureReadyCondition, clusterv1.MachineDeletingCondition, "PowerOn"}
)

// fuzzInput builds a Verdict input from a few fuzzed numbers; each bit or
// small field picks one aspect, so the fuzzer explores every combination.
func fuzzInput(flags uint32, conds uint64, lostAgo, after int64, annotation string) Input {
	in := Input{Now: t0, LostSince: t0.Add(-time.Duration(lostAgo))}
	if flags&1 != 0 {
		status := [...]corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown, ""}[flags>>1&3]
		ann := map[string]string{}
		if flags&(1<<3) != 0 {
			ann[fenceKey] = annotation
		}
		in.Node = node("n1", status, in.LostSince, ann)
	}
	if flags&(1<<4) != 0 {
		m := machine()
		if flags&(1<<5) != 0 {
			deleting(m)
		}
		if flags&(1<<6) != 0 {
			m.Status.NodeRef.Name = "other"
		}
		if flags&(1<<7) != 0 {
			annotated(fenceKey, annotation)(m)
		}
		for i := 0; i < 4; i++ {
			c := conds >> (16 * i)
			cond(fuzzTypes[c%3], fuzzStatuses[c/3%3], fuzzReasons[c/9%9], int64(c/81%3))(m)
		}
		in.Machine = m
	}
	in.Policy.MachineInfrastructureDeleted = flags&(1<<8) != 0
	if flags&(1<<9) != 0 {
		in.Policy.PoweredOffConditions = []v1alpha1.MachineConditionMatch{{Type: "PowerOn", Status: metav1.ConditionFalse, Reasons: []string{"PoweredOff"}}}
	}
	if flags&(1<<10) != 0 {
		in.Policy.ExternalFenceAnnotation = fenceKey
	}
	if flags&(1<<11) != 0 {
		d := v1alpha1.Duration(time.Duration(after).String())
		in.Policy.AssumeFencedAfter = &d
	}
	if flags&(1<<12) != 0 {
		in.LostSince = time.Time{}
	}
	if flags&(1<<13) != 0 {
		in.Policy.ExternalFenceSource = v1alpha1.ExternalFenceSourceNode
	}
	if flags&(1<<14) != 0 && in.Node != nil {
		writtenAt(in.Node, t0.Add(-time.Duration(lostAgo)).Add(time.Duration(after)))
	}
	if flags&(1<<15) != 0 {
		in.KubeletSilent = "kubelet Lease not renewed for 15s as seen by fedfailover"
	}
	return in
}

func FuzzVerdict(f *testing.F) {
	f.Add(uint32(0x1f31), uint64(0), int64(time.Hour), int64(time.Minute), "true")
	f.Add(uint32(0x1f33), uint64(0x0001_0003_0102), int64(time.Minute), int64(time.Hour), "true")
	f.Add(uint32(0x0591), uint64(0), int64(time.Minute), int64(0), t0.Add(-30*time.Second).Format(time.RFC3339))
	f.Add(uint32(0x0130), uint64(0x1b), int64(0), int64(0), "false")
	f.Add(uint32(0x0f03), uint64(0xffff_ffff), int64(-time.Hour), int64(-time.Minute), "")
	// Node source, a mark a year ahead written a minute into the loss.
	f.Add(uint32(0x640d), uint64(0), int64(time.Hour), int64(time.Minute), t0.Add(365*24*time.Hour).Format(time.RFC3339))
	f.Add(uint32(0x640d), uint64(0), int64(time.Hour), int64(time.Minute), t0.Add(-59*time.Minute).Format(time.RFC3339))
	// A Ready node, its kubelet silent: deleted Machine with its
	// infrastructure gone, and assumeFencedAfter long past.
	f.Add(uint32(0x8931), uint64(0), int64(time.Hour), int64(time.Minute), "")
	f.Add(uint32(0x8b31), uint64(0), int64(time.Hour), int64(time.Minute), "")
	f.Fuzz(func(t *testing.T, flags uint32, conds uint64, lostAgo, after int64, annotation string) {
		in := fuzzInput(flags, conds, lostAgo, after, annotation)
		got := Verdict(in)
		if again := Verdict(in); !reflect.DeepEqual(got, again) {
			t.Fatalf("not deterministic: %+v vs %+v", got, again)
		}
		if nodecond.IsReady(in.Node) && got.Fenced && in.KubeletSilent == "" {
			t.Fatalf("Ready node fenced without a silent kubelet: %+v", got)
		}
		if in.KubeletSilent != "" {
			// Evidence-first: only positive evidence of the machine's state.
			for _, e := range got.Found {
				if e.Kind == EvidenceAssumeFencedAfter {
					t.Fatalf("assumeFencedAfter counted for a node lost by evidence: %+v", got)
				}
			}
		}
		if got.Fenced != (len(got.Found) > 0) {
			t.Fatalf("Fenced=%v with %d evidence", got.Fenced, len(got.Found))
		}
		if !got.Fenced && len(got.Missing) == 0 {
			t.Fatalf("not fenced without saying why: %+v", got)
		}
		if got.Reason == "" {
			t.Fatalf("empty reason")
		}
		for _, e := range got.Found {
			if !evidenceEnabled(in.Policy, e.Kind) {
				t.Fatalf("evidence %s found but not enabled by %+v", e.Kind, in.Policy)
			}
			if e.Kind == EvidenceAssumeFencedAfter && in.Now.Before(in.LostSince.Add(in.Policy.AssumeFencedAfter.Get())) {
				t.Fatalf("assumed fenced too early")
			}
			if e.Kind == EvidenceExternalFence {
				// The default source is the Machine; the mark must be a time
				// within the current loss.
				at, err := time.Parse(time.RFC3339, annotation)
				if in.Policy.ExternalFenceSource == v1alpha1.ExternalFenceSourceNode {
					// The Node's mark: within the loss on the member's clock,
					// never after the member's newest record of the Node.
					if in.Node == nil || err != nil || at.Before(NotReadySince(in.Node)) || at.After(NewestMemberTime(in.Node).Add(markSlack)) {
						t.Fatalf("Node fence mark %q counted outside the current loss (Ready since %s, newest member time %s)",
							annotation, NotReadySince(in.Node), NewestMemberTime(in.Node))
					}
					continue
				}
				if in.Machine == nil || err != nil || at.Before(in.LostSince) || at.After(in.Now) {
					t.Fatalf("external fence %q counted outside the current loss (since %s, now %s)", annotation, in.LostSince, in.Now)
				}
			}
		}
	})
}

func evidenceEnabled(p v1alpha1.FencingSpec, kind EvidenceKind) bool {
	switch kind {
	case EvidenceMachineInfrastructureDeleted, EvidenceNodeDeletedInfrastructureGone:
		return p.MachineInfrastructureDeleted
	case EvidenceMachinePoweredOff:
		return len(p.PoweredOffConditions) > 0
	case EvidenceExternalFence:
		return p.ExternalFenceAnnotation != ""
	case EvidenceAssumeFencedAfter:
		return p.AssumeFencedAfter != nil && p.AssumeFencedAfter.Get() > 0
	}
	return false
}
