package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fedv1b1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/cli"
	"github.com/fedfailover/fedfailover/test/lab"
	"github.com/fedfailover/fedfailover/test/poll"
)

func splitKey(k string) (string, string) {
	ns, name, _ := strings.Cut(k, "/")
	return ns, name
}

// readTimeout bounds each read of the checker: a member that does not
// answer in time is unreadable for that sample.
const readTimeout = 3 * time.Second

func podRunning(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && lab.PodReady(p)
}

// runningPods counts the Running and Ready pods of app name in ns on member.
func (c *Campaign) runningPods(ctx context.Context, member, ns, name string) (int, error) {
	var pods corev1.PodList
	if err := c.clients[member].List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": name}); err != nil {
		return 0, err
	}
	n := 0
	for i := range pods.Items {
		if podRunning(&pods.Items[i]) {
			n++
		}
	}
	return n, nil
}

// sample reads every member and kubefed's view of them, as the checker
// sees the federation: with the lab's admin credentials, not fedfailover's.
func (c *Campaign) sample(ctx context.Context) Sample {
	s := Sample{Time: time.Now(), Readable: map[string]bool{}, Nodes: map[string]NodeSample{},
		Running: map[string]map[string]int{}, KubefedReady: map[string]bool{}}
	for _, w := range webWorkloads {
		s.Running[w] = map[string]int{}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range c.members {
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, readTimeout)
			defer cancel()
			var nodes corev1.NodeList
			if err := c.clients[m].List(rctx, &nodes); err != nil {
				return
			}
			running := map[string]int{}
			for _, w := range webWorkloads {
				ns, name := splitKey(w)
				n, err := c.runningPods(rctx, m, ns, name)
				if err != nil {
					return
				}
				running[w] = n
			}
			mu.Lock()
			defer mu.Unlock()
			s.Readable[m] = true
			for i := range nodes.Items {
				n := &nodes.Items[i]
				s.Nodes[n.Name] = NodeSample{Cluster: m, Ready: lab.NodeReadyStatus(n) == corev1.ConditionTrue, Tainted: hasTaint(n, outOfServiceTaint)}
			}
			for w, n := range running {
				s.Running[w][m] = n
			}
		})
	}
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	s.Pins = c.rspPins(rctx)
	var kfcs fedv1b1.KubeFedClusterList
	if err := c.host.List(rctx, &kfcs, client.InNamespace(lab.KubefedNS)); err == nil {
		for _, k := range kfcs.Items {
			for _, cond := range k.Status.Conditions {
				if cond.Type == "Ready" && cond.Status == corev1.ConditionTrue {
					s.KubefedReady[k.Name] = true
				}
			}
		}
	}
	wg.Wait()
	return s
}

// rspPins reads each workload's RSP pins (maxReplicas per member); nil
// when an RSP cannot be read.
func (c *Campaign) rspPins(ctx context.Context) map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, w := range webWorkloads {
		ns, name := splitKey(w)
		var rsp fedschedv1a1.ReplicaSchedulingPreference
		if err := c.host.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &rsp); err != nil {
			return nil
		}
		pins := map[string]int{}
		for m, p := range rsp.Spec.Clusters {
			if p.MaxReplicas != nil {
				pins[m] = int(*p.MaxReplicas)
			}
		}
		out[w] = pins
	}
	return out
}

func hasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// converged is I4: every node Ready, schedulable and without the
// out-of-service taint; every StatefulSet pod Running with its volume
// attached to exactly its node; every RSP at its baseline and every
// federated Deployment fully Running; no NodeRecovery record still open;
// every policy as it was set up, and Ready. It returns what is not yet so.
//
// Federated Deployments are judged by each member Deployment's own status.
func (c *Campaign) converged(ctx context.Context) (bool, string) {
	for _, m := range c.members {
		if ok, why := c.memberConverged(ctx, m); !ok {
			return false, m + ": " + why
		}
	}
	for _, w := range webWorkloads {
		ns, name := splitKey(w)
		if base, ok := c.rspBaseline[w]; ok {
			var rsp fedschedv1a1.ReplicaSchedulingPreference
			if err := c.host.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &rsp); err != nil {
				return false, err.Error()
			}
			if !apiequality.Semantic.DeepEqual(rsp.Spec, base) {
				return false, fmt.Sprintf("RSP %s not at its baseline: total %d %s, want total %d %s",
					w, rsp.Spec.TotalReplicas, cli.FormatClusters(rsp.Spec.Clusters), base.TotalReplicas, cli.FormatClusters(base.Clusters))
			}
		}
		// Each member's Deployment as kubefed wrote it, with its own
		// ReplicaSets' pods ready: a ReplicaSet left by a Deployment that
		// kubefed deleted and re-created (garbage collection after a member
		// API server restart can miss it) is the member's, not the
		// federation's.
		total := 0
		for _, m := range c.members {
			var d appsv1.Deployment
			err := c.clients[m].Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return false, err.Error()
			}
			want := ptr.Deref(d.Spec.Replicas, 1)
			if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != want || d.Status.ReadyReplicas != want {
				return false, fmt.Sprintf("%s on %s: %d of %d replicas ready and updated", w, m, d.Status.ReadyReplicas, want)
			}
			total += int(want)
		}
		if total != webTotal {
			return false, fmt.Sprintf("%s: %d replicas placed, want %d", w, total, webTotal)
		}
	}
	var recs v1alpha1.NodeRecoveryList
	if err := c.host.List(ctx, &recs); err != nil {
		return false, err.Error()
	}
	for _, r := range recs.Items {
		if r.Status.Phase != v1alpha1.RecoveryPhaseFinished {
			return false, fmt.Sprintf("NodeRecovery %s still %s: %s", r.Name, r.Status.Phase, r.Status.Message)
		}
	}
	for _, name := range []string{livePolicy, dryPolicy} {
		var p v1alpha1.FailoverPolicy
		if err := c.host.Get(ctx, client.ObjectKey{Name: name}, &p); err != nil {
			return false, err.Error()
		}
		if drift := policyDrift(c.policyBaseline[name], p.Spec); drift != "" {
			return false, fmt.Sprintf("policy %s not as set up: %s", name, drift)
		}
		if !apimeta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady) {
			cond := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			return false, fmt.Sprintf("policy %s not Ready: %+v", name, cond)
		}
	}
	return true, ""
}

func (c *Campaign) memberConverged(ctx context.Context, m string) (bool, string) {
	cl := c.clients[m]
	var nodes corev1.NodeList
	if err := cl.List(ctx, &nodes); err != nil {
		return false, err.Error()
	}
	if len(nodes.Items) != len(c.topology.Nodes[m]) {
		return false, fmt.Sprintf("%d nodes, want %d", len(nodes.Items), len(c.topology.Nodes[m]))
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		switch {
		case lab.NodeReadyStatus(n) != corev1.ConditionTrue:
			return false, n.Name + " not Ready"
		case hasTaint(n, outOfServiceTaint):
			return false, n.Name + " still has the out-of-service taint"
		case n.Spec.Unschedulable:
			return false, n.Name + " unschedulable"
		}
	}
	var vas storagev1.VolumeAttachmentList
	if err := cl.List(ctx, &vas); err != nil {
		return false, err.Error()
	}
	for i := range dbReplicas {
		var p corev1.Pod
		name := fmt.Sprintf("%s-%d", dbName, i)
		if err := cl.Get(ctx, client.ObjectKey{Namespace: dbNamespace, Name: name}, &p); err != nil {
			return false, err.Error()
		}
		if !podRunning(&p) {
			return false, fmt.Sprintf("%s/%s %s on %q", dbNamespace, name, p.Status.Phase, p.Spec.NodeName)
		}
		pv := fmt.Sprintf("pv-%s-%s-%d", dbNamespace, dbName, i)
		var on []string
		for _, va := range vas.Items {
			if src := va.Spec.Source.PersistentVolumeName; src != nil && *src == pv {
				on = append(on, fmt.Sprintf("%s(attached=%v)", va.Spec.NodeName, va.Status.Attached))
				if va.Spec.NodeName != p.Spec.NodeName || !va.Status.Attached || va.DeletionTimestamp != nil {
					return false, fmt.Sprintf("volume %s attached to %v, its pod runs on %s", pv, on, p.Spec.NodeName)
				}
			}
		}
		if len(on) != 1 {
			return false, fmt.Sprintf("volume %s has %d attachments %v, want 1 on %s", pv, len(on), on, p.Spec.NodeName)
		}
	}
	return true, ""
}

// until polls cond every 500ms until it holds or timeout passes; one slow
// read gets 10 s and does not use up the whole wait.
func until(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, string)) error {
	_, err := poll.Until(ctx, timeout, 500*time.Millisecond, what, poll.Reason(func(ctx context.Context) (bool, string) {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return cond(rctx)
	}))
	return err
}

// policyDrift names the parts of a policy's spec that differ from its
// baseline, or is "".
func policyDrift(want, got v1alpha1.FailoverPolicySpec) string {
	var out []string
	if want.DryRun != got.DryRun {
		out = append(out, fmt.Sprintf("dryRun %v, want %v", got.DryRun, want.DryRun))
	}
	if want.Paused != got.Paused {
		out = append(out, fmt.Sprintf("paused %v, want %v", got.Paused, want.Paused))
	}
	if !apiequality.Semantic.DeepEqual(want.ClusterSelector, got.ClusterSelector) {
		out = append(out, "clusterSelector differs")
	}
	if !apiequality.Semantic.DeepEqual(want.NodeRecovery, got.NodeRecovery) {
		out = append(out, fmt.Sprintf("nodeRecovery differs (enabled %v, want %v)",
			got.NodeRecovery.On(), want.NodeRecovery.On()))
	}
	if !apiequality.Semantic.DeepEqual(want.Rebalance, got.Rebalance) {
		out = append(out, fmt.Sprintf("rebalance differs (enabled %v, want %v)",
			got.Rebalance.On(), want.Rebalance.On()))
	}
	if len(out) == 0 && !apiequality.Semantic.DeepEqual(want, got) {
		out = append(out, "spec differs")
	}
	return strings.Join(out, "; ")
}
