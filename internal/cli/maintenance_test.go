package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

var maintenanceNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// maintenances: member3's refused, member1's drain under way, and one
// whose spec changed since the manager last wrote its status (in this
// order: BuildMaintenance keeps the order it is given).
func maintenances() []v1alpha1.MemberMaintenance {
	created := metav1.NewTime(maintenanceNow.Add(-4 * time.Minute))
	cond := func(typ string, s metav1.ConditionStatus, reason, msg string, gen int64) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen}
	}
	return []v1alpha1.MemberMaintenance{
		{ObjectMeta: metav1.ObjectMeta{Name: "m3-upgrade", Generation: 1, CreationTimestamp: created},
			Spec: v1alpha1.MemberMaintenanceSpec{Member: "member3"},
			Status: v1alpha1.MemberMaintenanceStatus{Conditions: []metav1.Condition{
				cond(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonMaintenanceNoRoom,
					"draining member3: the other members have no room for demo/web: 2 of its 6 replicas", 1)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "m1-kernel", Generation: 1, CreationTimestamp: created},
			Spec: v1alpha1.MemberMaintenanceSpec{Member: "member1"},
			Status: v1alpha1.MemberMaintenanceStatus{Moved: 12, Share: 30, Pending: 3,
				Progress: "12 of 30 replicas moved off member1, 3 not Ready yet on member2",
				Conditions: []metav1.Condition{
					cond(v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonMaintenanceAccepted, "room", 1),
					cond(v1alpha1.ConditionDrained, metav1.ConditionFalse, v1alpha1.ReasonDraining, "", 1)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "m2-new", Generation: 2, CreationTimestamp: created},
			Spec: v1alpha1.MemberMaintenanceSpec{Member: "member2", Force: true},
			Status: v1alpha1.MemberMaintenanceStatus{Conditions: []metav1.Condition{
				cond(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonMaintenanceNoRoom, "old", 1)}}},
	}
}

// The table says, per maintenance, whether it is accepted and how far
// its drain is; a refused one says why; a condition of an older
// generation is not shown as the answer.
func TestMaintenanceTable(t *testing.T) {
	v := BuildMaintenance(maintenances(), "", maintenanceNow)
	var b bytes.Buffer
	if err := RenderMaintenance(&b, v, true); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("table:\n%s\nwant a header and 3 rows", out)
	}
	for _, want := range []string{
		"m1-kernel", "12 of 30 replicas moved off member1, 3 not Ready yet on member2",
		"not accepted: InsufficientRoom", "demo/web: 2 of its 6 replicas",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table:\n%s\nwant %q", out, want)
		}
	}
	if row := lines[3]; !strings.Contains(row, "m2-new") || !strings.Contains(row, "Unknown") || strings.Contains(row, "old") {
		t.Errorf("row %q: want m2-new's acceptance Unknown (its condition is of generation 1, the spec of 2)", row)
	}
	if one := BuildMaintenance(maintenances(), "member1", maintenanceNow); len(one.Maintenances) != 1 || one.Maintenances[0].Name != "m1-kernel" {
		t.Errorf("member1 only: %+v", one.Maintenances)
	}
	var empty bytes.Buffer
	if err := RenderMaintenance(&empty, BuildMaintenance(nil, "", maintenanceNow), false); err != nil || !strings.Contains(empty.String(), "No MemberMaintenance") {
		t.Errorf("no maintenance: %q, %v", empty.String(), err)
	}
}

// The report prints as a typed object with the figures, and -o name
// names the MemberMaintenances.
func TestMaintenanceReport(t *testing.T) {
	r := NewMaintenanceReport(BuildMaintenance(maintenances(), "", maintenanceNow))
	var got struct {
		APIVersion, Kind string
		Maintenances     []MaintenanceItem
	}
	if err := json.Unmarshal(render(t, "json", r, nil), &got); err != nil {
		t.Fatal(err)
	}
	if got.Kind != KindMaintenanceReport || len(got.Maintenances) != 3 || got.Maintenances[1].Moved != 12 || got.Maintenances[1].Pending != 3 {
		t.Errorf("json: %+v", got)
	}
	if c := r.DeepCopyObject(); !bytes.Equal(render(t, "json", c.(Report), nil), render(t, "json", r, nil)) {
		t.Error("the copy prints differently")
	}
	if name := string(render(t, "name", r, nil)); !strings.Contains(name, "membermaintenance.failover.fedfailover.io/m1-kernel") {
		t.Errorf("-o name: %q", name)
	}
}
