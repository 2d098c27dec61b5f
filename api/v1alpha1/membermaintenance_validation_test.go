package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/fedfailover/fedfailover/api/v1alpha1"
)

// A MemberMaintenance is refused at admission with the field named: no
// member, a member that is no object name, a reason too long, and a
// member changed afterwards (end the maintenance, start another).
func TestMemberMaintenanceValidation(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	cases := []struct {
		name      string
		spec      v1alpha1.MemberMaintenanceSpec
		wantField string
		wantWhy   string
	}{
		{"no member", v1alpha1.MemberMaintenanceSpec{}, "spec.member", "at least 1 chars long"},
		{"member not a name", v1alpha1.MemberMaintenanceSpec{Member: "Member_1"}, "spec.member", "should match"},
		{"reason too long", v1alpha1.MemberMaintenanceSpec{Member: "member1", Reason: strings.Repeat("x", 257)}, "spec.reason", "may not be more than 256"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mm := &v1alpha1.MemberMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "mm-invalid-" + string(rune('a'+i))}, Spec: tc.spec}
			err := c.Create(ctx, mm)
			if err == nil {
				_ = c.Delete(ctx, mm)
				t.Fatalf("accepted %+v", tc.spec)
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantField) || !strings.Contains(err.Error(), tc.wantWhy) {
				t.Errorf("error %v, want Invalid naming %s (%s)", err, tc.wantField, tc.wantWhy)
			}
		})
	}

	mm := &v1alpha1.MemberMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "mm-immutable"},
		Spec: v1alpha1.MemberMaintenanceSpec{Member: "member1", Reason: "kernel upgrade"}}
	if err := c.Create(ctx, mm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, mm) })
	mm.Spec.Force = true
	if err := c.Update(ctx, mm); err != nil {
		t.Fatalf("setting spec.force: %v, want allowed", err)
	}
	mm.Spec.Member = "member2"
	err := c.Update(ctx, mm)
	if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.member") || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("changing spec.member: %v, want Invalid naming spec.member as immutable", err)
	}
}
