package cli

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
)

// now is the fixed time every golden file is rendered at.
var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) *metav1.Time {
	t := metav1.NewTime(now.Add(-d))
	return &t
}

func kfc(name string, ready corev1.ConditionStatus, labels map[string]string) kubefedv1beta1.KubeFedCluster {
	k := kubefedv1beta1.KubeFedCluster{}
	k.Name, k.Namespace, k.Labels = name, DefaultKubefedNamespace, labels
	k.Spec.APIEndpoint = "https://" + name + ".example:6443"
	k.Status.Conditions = []kubefedv1beta1.ClusterCondition{{Type: "Ready", Status: ready}}
	return k
}

func prefs(w, minR int64, maxR ...int64) fedschedv1a1.ClusterPreferences {
	p := fedschedv1a1.ClusterPreferences{Weight: w, MinReplicas: minR}
	if len(maxR) > 0 {
		p.MaxReplicas = &maxR[0]
	}
	return p
}

func rsp(ns, name string, total int32, clusters map[string]fedschedv1a1.ClusterPreferences, state string) fedschedv1a1.ReplicaSchedulingPreference {
	r := fedschedv1a1.ReplicaSchedulingPreference{}
	r.Namespace, r.Name = ns, name
	r.Spec.TargetKind, r.Spec.TotalReplicas, r.Spec.Clusters = "FederatedDeployment", total, clusters
	if state != "" {
		r.Annotations = map[string]string{contract.AnnotationRebalance: state}
	}
	return r
}

func rebalanceSpec() *v1alpha1.RebalanceSpec {
	return &v1alpha1.RebalanceSpec{CapacityExhaustedAfter: "10s", ClusterFailedAfter: "20s", MinInterval: "30s",
		Failback: v1alpha1.FailbackSpec{StabilizationWindow: "2m", MaxStep: 2, MakeBeforeBreak: true}}
}

func condition(t string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, LastTransitionTime: *ago(time.Minute)}
}

// webState is demo/web's annotation: baseline 2/2/2, member2 failing for
// 2 minutes, last changed 90 s ago.
const webState = `{"policy":"default","baseline":{"totalReplicas":6,"clusters":{"member1":{"minReplicas":0,"weight":1},` +
	`"member2":{"minReplicas":0,"weight":1},"member3":{"minReplicas":0,"weight":1}}},` +
	`"applied":{"totalReplicas":6,"clusters":{"member1":{"minReplicas":3,"maxReplicas":3,"weight":3},` +
	`"member2":{"minReplicas":0,"maxReplicas":0,"weight":0},"member3":{"minReplicas":3,"maxReplicas":3,"weight":3}}},` +
	`"lastChange":"2026-11-30T11:58:30Z","members":{"member1":{"roomSince":"2026-11-30T11:50:00Z"},` +
	`"member2":{"failingSince":"2026-11-30T11:58:00Z"},"member3":{"roomSince":"2026-11-30T11:50:00Z"}}}`

func defaultPolicy() v1alpha1.FailoverPolicy {
	maxUnhealthy := intstr.FromString("40%")
	p := v1alpha1.FailoverPolicy{}
	p.Name = "default"
	p.CreationTimestamp = *ago(time.Hour)
	p.Spec.NodeRecovery = &v1alpha1.NodeRecoverySpec{NotReadyFor: "60s", Method: v1alpha1.RecoveryMethodAuto,
		MaxUnhealthy: &maxUnhealthy, StormCooldown: "5m", Fencing: v1alpha1.FencingSpec{MachineInfrastructureDeleted: true}}
	p.Spec.Rebalance = rebalanceSpec()
	p.Spec.Rebalance.ReplicaSchedulingPreferences.Namespaces = []string{"demo"}
	p.Status = v1alpha1.FailoverPolicyStatus{
		ConnectedMembers: 2,
		Conditions: []metav1.Condition{
			condition(v1alpha1.ConditionReady, metav1.ConditionTrue, "Enforced", ""),
			condition(v1alpha1.ConditionMembersConnected, metav1.ConditionFalse, "MemberDisconnected", "member2: probe failed: connection refused"),
			condition(v1alpha1.ConditionStormActive, metav1.ConditionFalse, "NoStorm", ""),
			condition(v1alpha1.ConditionFencingBlocked, metav1.ConditionTrue, "NoFencingEvidence", "member3/m3-node-1 has no fencing evidence"),
			condition(v1alpha1.ConditionFailoverReady, metav1.ConditionFalse, v1alpha1.ReasonFailoverShortfall,
				"if member1 failed now, 2 of the 6 replicas of demo/web would find no room on the other members and stay Pending"),
		},
		// demo/web: member2 is failed (no room), member1 and member3 run
		// 3 each with room for one more: either's failure leaves 2 without room.
		FailoverReadiness: []v1alpha1.RSPReadiness{{Namespace: "demo", Name: "web", TotalReplicas: 6, Members: []v1alpha1.MemberReadiness{
			{Name: "member1", Replicas: 3, Room: 4, Shortfall: ptr.To(int32(2))},
			{Name: "member2", Replicas: 0, Room: 0, Shortfall: ptr.To(int32(0))},
			{Name: "member3", Replicas: 3, Room: 4, Shortfall: ptr.To(int32(2))},
		}}},
		Members: []v1alpha1.MemberStatus{
			{Name: "member1", Connected: true, Reason: "Connected", LastProbeTime: ago(5 * time.Second), ServerVersion: "v1.37.2",
				NodesReady: 3, NodesTotal: 4},
			{Name: "member2", Connected: false, Reason: "ProbeFailed", Message: "probe failed: connection refused", LastProbeTime: ago(3 * time.Second),
				ServerVersion: "v1.37.2"},
			{Name: "member3", Connected: true, Reason: "Connected", LastProbeTime: ago(4 * time.Second), ServerVersion: "v1.37.2",
				NodesReady: 2, NodesTotal: 3},
		},
		Recoveries: []v1alpha1.NodeRecoveryStatus{
			{Cluster: "member3", Node: "m3-node-1", Machine: "member3/m3-node-1", Phase: v1alpha1.RecoveryPhaseBlocked, LostSince: ago(3 * time.Minute),
				AffectedPods: 2, Message: "not fenced: Machine member3/m3-node-1 is not being deleted"},
			{Cluster: "member1", Node: "m1-node-2", Machine: "member1/m1-node-2", Phase: v1alpha1.RecoveryPhaseRecovered, Detection: v1alpha1.NodeLossDetectionEvidence, LostSince: ago(10 * time.Minute),
				FencedAt: ago(9 * time.Minute), Evidence: "MachineInfrastructureDeleted", Method: v1alpha1.RecoveryMethodOutOfServiceTaint,
				AffectedPods: 1, Message: "every tracked claim runs elsewhere"},
		},
		Rebalances: []v1alpha1.RebalanceStatus{{Namespace: "demo", Name: "web", Shifted: true, Reason: "MemberFailed", LastChangeTime: ago(90 * time.Second)}},
		RecentDecisions: []v1alpha1.Decision{
			{Time: *ago(90 * time.Second), Object: "ReplicaSchedulingPreference/demo/web", Action: "ShiftedWeights", Reason: "MemberFailed",
				Message: "member2 failed: 2 replicas moved to member1, member3"},
			{Time: *ago(3 * time.Minute), Cluster: "member3", Object: "Node/m3-node-1", Action: "Blocked", Reason: "NoFencingEvidence",
				Message: "not fenced: Machine member3/m3-node-1 is not being deleted"},
			{Time: *ago(9 * time.Minute), Cluster: "member1", Object: "Node/m1-node-2", Action: "TaintedOutOfService", Reason: "MachineInfrastructureDeleted",
				Message: "fenced: Machine member1/m1-node-2 is being deleted and its infrastructure is gone"},
		},
	}
	return p
}

func dryPolicy() v1alpha1.FailoverPolicy {
	p := v1alpha1.FailoverPolicy{}
	p.Name = "edge-dry-run"
	p.CreationTimestamp = *ago(30 * time.Minute)
	p.Spec.DryRun = true
	p.Spec.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "edge"}}
	p.Spec.Rebalance = rebalanceSpec()
	p.Spec.Rebalance.ReplicaSchedulingPreferences.Namespaces = []string{"edge"}
	p.Status = v1alpha1.FailoverPolicyStatus{ConnectedMembers: 2,
		Conditions: []metav1.Condition{condition(v1alpha1.ConditionReady, metav1.ConditionTrue, "Enforced", "")},
		Members: []v1alpha1.MemberStatus{
			{Name: "member1", Connected: true, LastProbeTime: ago(20 * time.Second), NodesReady: 3, NodesTotal: 4},
			{Name: "member3", Connected: true, LastProbeTime: ago(20 * time.Second), NodesReady: 2, NodesTotal: 3},
		},
		RecentDecisions: []v1alpha1.Decision{{Time: *ago(2 * time.Minute), Object: "ReplicaSchedulingPreference/edge/cache",
			Action: "ShiftedWeights", Reason: "CapacityExhausted", Message: "member3 out of capacity: 1 replica would move to member1", DryRun: true}},
	}
	return p
}

// fixture is a federation of three members: member2 is down, member1 lost
// a node that was recovered, member3 lost one that cannot be fenced.
func fixture() *Snapshot {
	web := rsp("demo", "web", 6, map[string]fedschedv1a1.ClusterPreferences{
		"member1": prefs(3, 3, 3), "member2": prefs(0, 0, 0), "member3": prefs(3, 3, 3)}, "")
	return &Snapshot{
		Now:      now,
		Policies: []v1alpha1.FailoverPolicy{defaultPolicy(), dryPolicy()},
		Clusters: []kubefedv1beta1.KubeFedCluster{
			kfc("member1", corev1.ConditionTrue, map[string]string{"tier": "edge"}),
			kfc("member2", corev1.ConditionFalse, nil),
			kfc("member3", corev1.ConditionTrue, map[string]string{"tier": "edge"}),
		},
		RSPs: []fedschedv1a1.ReplicaSchedulingPreference{
			web,
			rsp("edge", "cache", 4, map[string]fedschedv1a1.ClusterPreferences{"member1": prefs(1, 0), "member3": prefs(3, 1)}, ""),
			rsp("other", "batch", 3, map[string]fedschedv1a1.ClusterPreferences{"*": prefs(1, 0)}, ""),
		},
		Records:    []v1alpha1.NodeRecovery{recoveredRecord(), returnedRecord(), blockedRecord()},
		Guards:     []v1alpha1.RecoveryGuard{guard("member1", false, ago(40*time.Minute), "")},
		Rebalances: []v1alpha1.RebalanceRecord{stateRecord("demo", "web", webState)},
	}
}

// stateRecord is the RebalanceRecord of RSP ns/name holding state (JSON,
// as the legacy annotation spelled it).
func stateRecord(ns, name, state string) v1alpha1.RebalanceRecord {
	m, err := contract.DecodeRebalanceState(map[string]string{contract.AnnotationRebalance: state})
	if err != nil {
		panic(err)
	}
	r := v1alpha1.RebalanceRecord{Spec: m.RecordSpec()}
	r.Namespace, r.Name = ns, name
	return r
}

// record is a NodeRecovery about a node of a member of the default policy,
// created when the loss was seen.
func record(name, cluster, node string, seen time.Duration) v1alpha1.NodeRecovery {
	r := v1alpha1.NodeRecovery{}
	r.Name, r.CreationTimestamp = name, *ago(seen)
	r.Spec = v1alpha1.NodeRecoveryRecordSpec{Cluster: cluster, Node: node, NodeUID: "uid-" + node, ProviderID: "kwok://" + node,
		Machine: &v1alpha1.MachineReference{Namespace: cluster, Name: node, UID: "muid-" + node}, Policy: "default",
		LostSince: ago(seen + 30*time.Second)} // the member reported it: shown, never compared
	r.Status.ObservedAt, r.Status.ReadyObservedAt, r.Status.ReadyStatus = ago(seen), ago(seen), "Unknown"
	return r
}

// recoveredRecord: member1/m1-node-2 was fenced 9 minutes ago and its
// claim runs elsewhere; the node is still down.
func recoveredRecord() v1alpha1.NodeRecovery {
	r := record("member1.m1-node-2.5f1c0a9e3b", "member1", "m1-node-2", 10*time.Minute)
	r.Status.Phase, r.Status.Evidence, r.Status.Method = v1alpha1.RecoveryPhaseRecovered, "MachineInfrastructureDeleted", v1alpha1.RecoveryMethodOutOfServiceTaint
	r.Status.Claims, r.Status.IntentAt, r.Status.ActedAt, r.Status.RecoveredAt = []string{"demo/data-db-0"}, ago(9*time.Minute), ago(9*time.Minute), ago(8*time.Minute)
	r.Status.Message = "1 claims run on other nodes, 62.4s after fencing"
	r.Status.Detection = v1alpha1.NodeLossDetectionEvidence
	r.Status.DetectedBy = "lost by evidence: Machine member1/m1-node-2 is being deleted and its infrastructure is gone " +
		"(InfrastructureReady=False, reason ObjectDeleted), kubelet Lease not renewed for 14s as seen by fedfailover"
	return r
}

// returnedRecord: an earlier loss of m1-node-2, made from an older
// fedfailover's node annotations, closed when the node came back.
func returnedRecord() v1alpha1.NodeRecovery {
	r := record("member1.m1-node-2.0d6e2b7a41", "member1", "m1-node-2", 3*time.Hour)
	r.Spec.Machine, r.Spec.ProviderID = nil, ""
	r.Status.Phase, r.Status.FinishReason = v1alpha1.RecoveryPhaseFinished, v1alpha1.FinishNodeReturned
	r.Status.Evidence, r.Status.Method, r.Status.Migrated = "MachineInfrastructureDeleted", v1alpha1.RecoveryMethodForceDelete, true
	r.Status.IntentAt, r.Status.ActedAt, r.Status.RecoveredAt, r.Status.FinishedAt = ago(3*time.Hour), ago(3*time.Hour), ago(170*time.Minute), ago(2*time.Hour)
	r.Status.Message = "Node m1-node-2 is Ready again"
	return r
}

// blockedRecord: member3/m3-node-1 is lost without fencing evidence.
func blockedRecord() v1alpha1.NodeRecovery {
	r := record("member3.m3-node-1.9a2f4c6d80", "member3", "m3-node-1", 3*time.Minute)
	r.Status.Phase = v1alpha1.RecoveryPhaseBlocked
	r.Status.Message = "not fenced: Machine member3/m3-node-1 is not being deleted"
	return r
}

func guard(cluster string, storm bool, ended *metav1.Time, msg string) v1alpha1.RecoveryGuard {
	g := v1alpha1.RecoveryGuard{}
	g.Name = cluster
	g.Status = v1alpha1.RecoveryGuardStatus{StormActive: storm, StormEndedAt: ended, Message: msg}
	return g
}

// machine is a Cluster API Machine of a member node.
func machine(cluster, node string, deleting bool, infraReason string) *clusterv1.Machine {
	m := &clusterv1.Machine{}
	m.Namespace, m.Name = cluster, node
	m.Labels = map[string]string{clusterv1.ClusterNameLabel: cluster}
	m.Spec.ClusterName = cluster
	m.Status.NodeRef.Name = node
	m.Spec.ProviderID = "kwok://" + node
	if deleting {
		m.DeletionTimestamp = ago(9 * time.Minute)
		m.Finalizers = []string{clusterv1.MachineFinalizer}
	}
	status := metav1.ConditionTrue
	if infraReason != clusterv1.MachineInfrastructureReadyReason {
		status = metav1.ConditionFalse
	}
	m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineInfrastructureReadyCondition, Status: status, Reason: infraReason}}
	return m
}
