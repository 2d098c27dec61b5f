package noderecovery

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
)

// TestMigrateLeavesTheGivenNodeAlone: migrating an older fedfailover's node
// marks removes them from the member and makes a Migrated record; the pass
// goes on with a copy of the Node without them, and the Node it was given
// (in production the member cache's own) is left as it was.
func TestMigrateLeavesTheGivenNodeAlone(t *testing.T) {
	marks := contract.NodeMarks{LostSince: t0.Add(-time.Minute), FencedBy: "MachineInfrastructureDeleted",
		FencedAt: t0.Add(-30 * time.Second), Action: v1alpha1.RecoveryMethodOutOfServiceTaint, TaintedByUs: true,
		Claims: []string{"default/data-db-0"}}
	n1 := lostNode("n1", t0.Add(-time.Minute))
	n1.Annotations = marks.Annotations()
	w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint), false, nil, n1)
	ctx := context.Background()
	v, err := w.r.load(ctx, "member1")
	if err != nil {
		t.Fatal(err)
	}
	if len(v.nodes) != 1 {
		t.Fatalf("loaded %d nodes, want 1", len(v.nodes))
	}
	given := v.nodes[0]
	before := given.DeepCopy()
	got, err := w.r.migrate(ctx, v, given)
	if err != nil {
		t.Fatal(err)
	}
	if contract.HasNodeMarks(got.Annotations) {
		t.Errorf("the pass goes on with annotations %v, want no node marks", got.Annotations)
	}
	if !equality.Semantic.DeepEqual(given, before) {
		t.Errorf("migrate modified the Node it was given: %+v, was %+v", given.ObjectMeta, before.ObjectMeta)
	}
	if contract.HasNodeMarks(w.node("n1").Annotations) {
		t.Errorf("member Node keeps annotations %v, want the node marks removed", w.node("n1").Annotations)
	}
	if rec := v.records["n1"]; rec == nil || !rec.Status.Migrated {
		t.Errorf("record %+v, want one made from the node marks (Migrated)", rec)
	}
}
