package policystatus

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

func cond(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
}

var (
	connected    = cond(v1alpha1.ConditionMembersConnected, metav1.ConditionTrue, v1alpha1.ReasonAllConnected, "all 2 members connected")
	disconnected = cond(v1alpha1.ConditionMembersConnected, metav1.ConditionFalse, v1alpha1.ReasonMembersNotConnected, "1 of 2 members not connected")
	noMembers    = cond(v1alpha1.ConditionMembersConnected, metav1.ConditionFalse, v1alpha1.ReasonNoMembers, "no KubeFedCluster matches")
	listFailed   = cond(v1alpha1.ConditionMembersConnected, metav1.ConditionUnknown, v1alpha1.ReasonListFailed, "forbidden")
	storm        = cond(v1alpha1.ConditionStormActive, metav1.ConditionTrue, v1alpha1.ReasonStormActive, "member1: 3 of 5 nodes lost")
	noStorm      = cond(v1alpha1.ConditionStormActive, metav1.ConditionFalse, v1alpha1.ReasonNoStorm, "")
	blocked      = cond(v1alpha1.ConditionFencingBlocked, metav1.ConditionTrue, v1alpha1.ReasonNoFencingEvidence, "member1/n1: not fenced")
	notBlocked   = cond(v1alpha1.ConditionFencingBlocked, metav1.ConditionFalse, v1alpha1.ReasonNoBlockedNodes, "")
	denied       = cond(v1alpha1.ConditionMemberPermissionDenied, metav1.ConditionTrue, v1alpha1.ReasonMemberPermissionDenied,
		"member member1: the member refused: patch nodes")
	notDenied = cond(v1alpha1.ConditionMemberPermissionDenied, metav1.ConditionFalse, v1alpha1.ReasonNoPermissionDenied, "")
	shifted   = cond(v1alpha1.ConditionRebalancing, metav1.ConditionTrue, v1alpha1.ReasonShifted, "demo/web: shifted")
)

func testPolicy(mut ...func(*v1alpha1.FailoverPolicy)) *v1alpha1.FailoverPolicy {
	p := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 4},
		Spec: v1alpha1.FailoverPolicySpec{NodeRecovery: &v1alpha1.NodeRecoverySpec{}}}
	for _, m := range mut {
		m(p)
	}
	return p
}

func invalidClusterSelector(p *v1alpha1.FailoverPolicy) {
	p.Spec.ClusterSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Near"}}}
}

func TestReady(t *testing.T) {
	cases := []struct {
		name   string
		pol    *v1alpha1.FailoverPolicy
		conds  []metav1.Condition
		status metav1.ConditionStatus
		reason string
		msg    []string
	}{
		{name: "nothing written yet", pol: testPolicy(), status: metav1.ConditionTrue, reason: v1alpha1.ReasonEnforcing},
		{name: "all well", pol: testPolicy(), conds: []metav1.Condition{connected, noStorm, notBlocked},
			status: metav1.ConditionTrue, reason: v1alpha1.ReasonEnforcing, msg: []string{"enforced"}},
		{name: "dry run says so", pol: testPolicy(func(p *v1alpha1.FailoverPolicy) { p.Spec.DryRun = true }),
			status: metav1.ConditionTrue, reason: v1alpha1.ReasonEnforcing, msg: []string{"dry run"}},
		{name: "paused: not enforced, says so", pol: testPolicy(func(p *v1alpha1.FailoverPolicy) { p.Spec.Paused = true }),
			conds:  []metav1.Condition{connected, noStorm, notBlocked},
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonPaused, msg: []string{"spec.paused"}},
		{name: "a disconnected member is MembersConnected's news", pol: testPolicy(), conds: []metav1.Condition{disconnected},
			status: metav1.ConditionTrue, reason: v1alpha1.ReasonEnforcing},
		{name: "rebalancing is the policy at work", pol: testPolicy(), conds: []metav1.Condition{shifted},
			status: metav1.ConditionTrue, reason: v1alpha1.ReasonEnforcing},
		{name: "no member", pol: testPolicy(), conds: []metav1.Condition{noMembers},
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonNoMembers, msg: []string{"MembersConnected: no KubeFedCluster"}},
		{name: "members unreadable", pol: testPolicy(), conds: []metav1.Condition{listFailed},
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonListFailed, msg: []string{"forbidden"}},
		{name: "storm", pol: testPolicy(), conds: []metav1.Condition{connected, storm, notBlocked},
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonStormActive, msg: []string{"StormActive: member1: 3 of 5 nodes lost"}},
		{name: "fencing blocked", pol: testPolicy(), conds: []metav1.Condition{connected, noStorm, blocked},
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonNoFencingEvidence, msg: []string{"FencingBlocked: member1/n1"}},
		{name: "a member refuses a permission", pol: testPolicy(), conds: []metav1.Condition{connected, noStorm, notBlocked, denied},
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonMemberPermissionDenied,
			msg: []string{"MemberPermissionDenied: member member1: the member refused: patch nodes"}},
		{name: "no refusal", pol: testPolicy(), conds: []metav1.Condition{connected, notDenied},
			status: metav1.ConditionTrue, reason: v1alpha1.ReasonEnforcing},
		{name: "storm first, every message kept", pol: testPolicy(), conds: []metav1.Condition{blocked, storm},
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonStormActive, msg: []string{"StormActive: ", "; FencingBlocked: "}},
		{name: "invalid selector from the spec itself, before anything else",
			pol: testPolicy(invalidClusterSelector), conds: []metav1.Condition{storm,
				cond(v1alpha1.ConditionMembersConnected, metav1.ConditionFalse, v1alpha1.ReasonInvalidSelector, "spec.clusterSelector: dup")},
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonInvalidSelector,
			msg: []string{"spec.clusterSelector: ", "Near", "acts on nothing new", "; StormActive: "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Ready(c.pol, c.conds)
			if got.Type != v1alpha1.ConditionReady || got.Status != c.status || got.Reason != c.reason || got.ObservedGeneration != 4 {
				t.Errorf("Ready %+v, want %s/%s at generation 4", got, c.status, c.reason)
			}
			for _, m := range c.msg {
				if !strings.Contains(got.Message, m) {
					t.Errorf("message %q lacks %q", got.Message, m)
				}
			}
			if strings.Count(got.Message, "spec.clusterSelector") > 1 {
				t.Errorf("invalid selector reported twice: %q", got.Message)
			}
		})
	}
}

func TestReadyInputsChanged(t *testing.T) {
	old := testPolicy()
	old.Status.Conditions = []metav1.Condition{connected, noStorm}
	same := old.DeepCopy()
	same.Status.Members = []v1alpha1.MemberStatus{{Name: "m"}}
	stormy := old.DeepCopy()
	stormy.Status.Conditions[1] = storm
	if ReadyInputsChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: same}) {
		t.Error("a change that leaves Ready as it is passes")
	}
	if !ReadyInputsChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: stormy}) {
		t.Error("a storm does not pass")
	}
}

func TestConditionsKeepTransitionTime(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pol := testPolicy()
	recorded := noStorm
	recorded.LastTransitionTime = then
	pol.Status.Conditions = []metav1.Condition{recorded}

	same := Condition(pol, v1alpha1.ConditionStormActive, metav1.ConditionFalse, v1alpha1.ReasonNoStorm, "still none")
	flipped := Condition(pol, v1alpha1.ConditionStormActive, metav1.ConditionTrue, v1alpha1.ReasonStormActive, "now")
	if got := Conditions(pol, same)[0]; !got.LastTransitionTime.Equal(&then) || got.Message != "still none" || got.ObservedGeneration != 4 {
		t.Errorf("unchanged status: %+v", got)
	}
	if got := Conditions(pol, flipped)[0]; got.LastTransitionTime.Equal(&then) || got.LastTransitionTime.IsZero() {
		t.Errorf("flipped status kept its transition time: %+v", got)
	}
	long := Condition(pol, "X", metav1.ConditionTrue, "R", strings.Repeat("a", MaxConditionMessage+10))
	if len(long.Message) != MaxConditionMessage || !strings.HasSuffix(long.Message, "...") {
		t.Errorf("message not bounded: %d", len(long.Message))
	}
}
