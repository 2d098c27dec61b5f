package cli

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// TestStatusNamesRefusedPermissions: a member that refuses requests of
// fedfailover's is named under the members, with what it refuses, and the
// policy's condition message is shown with -o wide.
func TestStatusNamesRefusedPermissions(t *testing.T) {
	s := fixture()
	p := &s.Policies[0]
	const msg = "the member refused: patch nodes (nodes \"m1-node-2\" is forbidden: User \"system:serviceaccount:fedfailover-system:fedfailover-member\" cannot patch resource \"nodes\")"
	p.Status.Members[0].Reason, p.Status.Members[0].Message = v1alpha1.ReasonMemberPermissionDenied, msg+"; connected to https://member1:6443"
	p.Status.Conditions = append(p.Status.Conditions, condition(v1alpha1.ConditionMemberPermissionDenied, metav1.ConditionTrue,
		v1alpha1.ReasonMemberPermissionDenied, "member member1: "+msg))
	v := BuildStatus(s)
	var b bytes.Buffer
	if err := RenderStatus(&b, v, false); err != nil {
		t.Fatal(err)
	}
	want := "member1 refuses requests of fedfailover's (MemberPermissionDenied): " + msg
	if !strings.Contains(b.String(), want) {
		t.Errorf("status lacks %q:\n%s", want, b.String())
	}
	b.Reset()
	if err := RenderStatus(&b, v, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "MemberPermissionDenied: member member1: the member refused: patch nodes") {
		t.Errorf("wide status lacks the condition's message:\n%s", b.String())
	}
}
