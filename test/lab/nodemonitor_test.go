package lab

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestJudgeNode(t *testing.T) {
	grace := 50 * time.Second
	for _, tc := range []struct {
		name    string
		ready   corev1.ConditionStatus
		tainted bool
		since   time.Duration
		want    monitorAction
	}{
		{"fresh lease, ready", corev1.ConditionTrue, false, time.Second, monitorNone},
		{"lease at the grace period", corev1.ConditionTrue, false, grace, monitorNone},
		{"stale lease, ready", corev1.ConditionTrue, false, grace + time.Second, monitorMarkUnreachable},
		{"stale lease, unknown but not tainted", corev1.ConditionUnknown, false, grace + time.Second, monitorMarkUnreachable},
		{"stale lease, already marked", corev1.ConditionUnknown, true, grace + time.Second, monitorNone},
		{"back: lease renewed and ready", corev1.ConditionTrue, true, time.Second, monitorUntaint},
		{"lease renewed, status not yet ready", corev1.ConditionUnknown, true, time.Second, monitorNone},
	} {
		if got := judgeNode(tc.ready, tc.tainted, tc.since, grace); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestMarkUnreachableAsTheNodeLifecycleController(t *testing.T) {
	before := metav1.NewTime(time.Unix(1000, 0))
	now := metav1.NewTime(time.Unix(2000, 0))
	st := staticNodeStatus(corev1.NodeStatus{}, "192.168.1.1", before)
	markUnreachable(&st, now)
	if len(st.Conditions) != 4 {
		t.Fatalf("%d conditions, want the 4 kubelet conditions", len(st.Conditions))
	}
	for _, c := range st.Conditions {
		if c.Status != corev1.ConditionUnknown || c.Reason != "NodeStatusUnknown" {
			t.Errorf("%s: %s/%s, want Unknown/NodeStatusUnknown", c.Type, c.Status, c.Reason)
		}
		if !c.LastTransitionTime.Equal(&now) || !c.LastHeartbeatTime.Equal(&before) {
			t.Errorf("%s: transition %v heartbeat %v; want the transition now and the last heartbeat kept", c.Type, c.LastTransitionTime, c.LastHeartbeatTime)
		}
	}
	later := metav1.NewTime(time.Unix(3000, 0))
	markUnreachable(&st, later)
	for _, c := range st.Conditions {
		if !c.LastTransitionTime.Equal(&now) {
			t.Errorf("%s: a second mark moved the transition time to %v", c.Type, c.LastTransitionTime)
		}
	}
}

func TestUnreachableTaints(t *testing.T) {
	now := metav1.Now()
	other := corev1.Taint{Key: "x", Effect: corev1.TaintEffectNoSchedule}
	on, changed := unreachableTaints([]corev1.Taint{other}, true, now)
	if !changed || !hasUnreachableTaints(on) || len(on) != 3 {
		t.Fatalf("on: %v changed %t", on, changed)
	}
	for _, tt := range on {
		if tt.Effect == corev1.TaintEffectNoExecute && tt.TimeAdded == nil {
			t.Error("the NoExecute taint has no timeAdded (the taint-eviction controller counts tolerationSeconds from it)")
		}
	}
	if again, changed := unreachableTaints(on, true, now); changed || len(again) != 3 {
		t.Errorf("tainting twice: %v changed %t", again, changed)
	}
	off, changed := unreachableTaints(on, false, now)
	if !changed || len(off) != 1 || off[0].Key != "x" {
		t.Errorf("off: %v changed %t", off, changed)
	}
	if _, changed := unreachableTaints(off, false, now); changed {
		t.Error("untainting an untainted node is a change")
	}
}

func TestNoNodeLifecycleFlags(t *testing.T) {
	if got := kcmControllers(Options{}); got != "--controllers=*" {
		t.Errorf("default lab: %s", got)
	}
	if got := kcmControllers(Options{NoNodeLifecycle: true}); got != "--controllers=*,-node-lifecycle-controller" {
		t.Errorf("scale lab: %s", got)
	}
	if got := kcmControllers(Options{NoNodeLifecycle: true, NoAttachDetach: true}); got != "--controllers=*,-node-lifecycle-controller,-persistentvolume-attach-detach-controller" {
		t.Errorf("scale lab with the bulk via etcd: %s", got)
	}
	l := &Lab{opts: Options{BinDir: "/bin", NoNodeLifecycle: true}}
	c := &ClusterState{Name: "member1", Dir: "/lab/member1", Kubeconfig: "/lab/member1/kubeconfig"}
	if args := strings.Join(l.kcmProc(c).Args, " "); !strings.Contains(args, "-node-lifecycle-controller") {
		t.Errorf("kube-controller-manager args %q keep the node-lifecycle controller", args)
	}
}

func TestSharedEtcdPrefixes(t *testing.T) {
	if etcdPrefix(false, "member1") != "/registry" {
		t.Error("a cluster with its own etcd must keep the default prefix")
	}
	a, b := etcdPrefix(true, "member1"), etcdPrefix(true, "member10")
	// One prefix must not be a key prefix of another's keys.
	if strings.HasPrefix(b+"/", a+"/") || a == b {
		t.Errorf("prefixes %q and %q overlap", a, b)
	}
	l := &Lab{opts: Options{BinDir: "/bin", SharedEtcd: true}}
	c := &ClusterState{Name: "member1", Dir: "/lab/member1", EtcdPort: 2379}
	if args := strings.Join(l.apiserverProc(c).Args, " "); !strings.Contains(args, "--etcd-prefix=/lab-member1") {
		t.Errorf("kube-apiserver args %q lack the member's prefix", args)
	}
}

func TestHeartbeatPatchTouchesOnlyHeartbeats(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	data, err := HeartbeatPatch(now)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Status struct {
			Conditions []map[string]string `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Status.Conditions) != 4 {
		t.Fatalf("%d conditions in %s", len(p.Status.Conditions), data)
	}
	for _, c := range p.Status.Conditions {
		if len(c) != 2 || c["type"] == "" || c["lastHeartbeatTime"] != "2026-01-02T03:04:05Z" {
			t.Errorf("condition patch %v: want only type and lastHeartbeatTime", c)
		}
	}
}

func TestStaticPodStatusIsWhatDecisionsRead(t *testing.T) {
	pod := scalePod("bench", "n-0", "n")
	st := staticPodStatus(pod, "10.101.0.1", metav1.Now())
	if st.Phase != corev1.PodRunning {
		t.Errorf("phase %s", st.Phase)
	}
	want := map[corev1.PodConditionType]bool{corev1.PodReady: true, corev1.PodScheduled: true}
	for _, c := range st.Conditions {
		if want[c.Type] && c.Status == corev1.ConditionTrue {
			delete(want, c.Type)
		}
	}
	if len(want) > 0 {
		t.Errorf("conditions %v lack %v True", st.Conditions, want)
	}
	if len(st.ContainerStatuses) != 1 || !st.ContainerStatuses[0].Ready || st.ContainerStatuses[0].State.Running == nil {
		t.Errorf("container statuses %v", st.ContainerStatuses)
	}
}

func TestStaticPodIPsDiffer(t *testing.T) {
	seen := map[string]bool{}
	for k := 0; k < 20000; k++ {
		ip := StaticPodIP(1, k)
		if seen[ip] {
			t.Fatalf("pod %d reuses %s", k, ip)
		}
		seen[ip] = true
	}
}

func TestSharedEtcdCannotFailAlone(t *testing.T) {
	l := &Lab{opts: Options{SharedEtcd: true}}
	if err := l.StopEtcd("member1"); !errors.Is(err, errSharedEtcd) {
		t.Errorf("stopping one cluster's etcd in a shared-etcd lab: %v", err)
	}
	if err := l.StartEtcd(context.Background(), "member1"); !errors.Is(err, errSharedEtcd) {
		t.Errorf("starting one cluster's etcd in a shared-etcd lab: %v", err)
	}
}

// The attacher lists a member's VolumeAttachments at most once per
// AttachEvery, each member on its own clock; by default on every pass.
func TestAttachDueOncePerPeriod(t *testing.T) {
	l := &Lab{opts: Options{AttachEvery: time.Hour}}
	if !l.attachDue("member1") || l.attachDue("member1") {
		t.Error("member1: want a first pass due and the next one not within the period")
	}
	if !l.attachDue("member2") {
		t.Error("member2: its first pass is due whatever member1 did")
	}
	every := &Lab{}
	for pass := range 2 {
		if !every.attachDue("member1") {
			t.Errorf("without AttachEvery pass %d is not due, want every pass due", pass+1)
		}
	}
}

// A lab node's kwok selects its node by label, or by name with
// KwokSingleNode (its pod watch then carries the node's name).
func TestKwokManagesItsNode(t *testing.T) {
	byLabel := (&Lab{}).kwokManages("member1-node-1")
	byName := (&Lab{opts: Options{KwokSingleNode: true}}).kwokManages("member1-node-1")
	if byLabel != "--manage-nodes-with-label-selector="+FailureDomainLabel+"=member1-node-1" || byName != "--manage-single-node=member1-node-1" {
		t.Errorf("kwok flags %q and %q", byLabel, byName)
	}
}
