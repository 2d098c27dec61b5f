package main

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/internal/lab"
)

// scDecisionPace is how often the decision latencies are sampled.
const scDecisionPace = 100 * time.Millisecond

// powerOffs powers off o.powerOffs lab nodes one second apart (members
// round-robin, each member keeps one lab node on) with Machine evidence and
// times each from its evidence being complete to the out-of-service taint.
func (b *scBench) powerOffs(ctx context.Context) (*scLatency, error) {
	if b.o.powerOffs == 0 {
		return latency(nil, 0), nil
	}
	members := b.l.Members()
	b.progress("powering off %d lab nodes one after another (Machine evidence)", b.o.powerOffs)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		samples []float64
		missing int
	)
	for i := 0; i < b.o.powerOffs; i++ {
		member := members[i%len(members)]
		node := lab.NodeName(member, i/len(members)+1)
		if err := b.l.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
			return nil, err
		}
		evidence := time.Now()
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := b.timeTaint(ctx, member, node, evidence)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				b.progress("  %s: %v", node, err)
				missing++
				return
			}
			b.progress("  %s: evidence -> taint %.3fs", node, s)
			samples = append(samples, s)
		}()
		if err := sleepCtx(ctx, time.Second); err != nil {
			return nil, err
		}
	}
	wg.Wait()
	return latency(samples, missing), nil
}

// timeTaint samples the node until it carries the out-of-service taint and
// returns the seconds from the evidence complete: the later of the Machine
// evidence written and the node's NotReady transition + notReadyFor (when
// fedfailover's own loss rule turns true).
func (b *scBench) timeTaint(ctx context.Context, member, node string, evidence time.Time) (float64, error) {
	cl, err := b.l.Client(member)
	if err != nil {
		return 0, err
	}
	var lost, tainted time.Time
	err = pollEvery(ctx, scGrace+b.o.notReadyFor+90*time.Second, scDecisionPace, node+" tainted out-of-service", func(ctx context.Context) (bool, string, error) {
		n := &corev1.Node{}
		if err := cl.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return false, err.Error(), nil //nolint:nilerr // a failed read is retried until the deadline
		}
		now := time.Now()
		if c := rcReadyCondition(n); c != nil && c.Status != corev1.ConditionTrue && lost.IsZero() {
			lost = c.LastTransitionTime.Add(b.o.notReadyFor)
		}
		if rcHasOOSTaint(n) {
			tainted = now
			return true, "", nil
		}
		return false, fmt.Sprintf("Ready=%s", lab.NodeReadyStatus(n)), nil
	})
	if err != nil {
		return 0, err
	}
	if lost.IsZero() {
		return 0, fmt.Errorf("tainted before it was seen NotReady")
	}
	complete := evidence
	if lost.After(complete) {
		complete = lost
	}
	return tainted.Sub(complete).Seconds(), nil
}

var rspGVK = schema.GroupVersionKind{Group: "scheduling.kubefed.io", Version: "v1alpha1", Kind: "ReplicaSchedulingPreference"}

// exhaustion cordons the last member's lab nodes, scales o.exhaustRSPs RSPs
// up by one replica per member and times each from its new replica's
// Unschedulable transition + capacityExhaustedAfter to fedfailover's first
// change of the RSP's clusters.
func (b *scBench) exhaustion(ctx context.Context) (*scLatency, error) {
	if b.o.exhaustRSPs == 0 {
		return latency(nil, 0), nil
	}
	members := b.l.Members()
	member := members[len(members)-1]
	b.progress("exhausting %s (its lab nodes cordoned) and scaling %d RSPs up", member, b.o.exhaustRSPs)
	if err := b.l.ExhaustCapacity(ctx, member, lab.ExhaustCordon); err != nil {
		return nil, err
	}
	before := map[string]any{}
	for i := 0; i < b.o.exhaustRSPs; i++ {
		name := fmt.Sprintf("%s-%d", scWorkload, i)
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(rspGVK)
		if err := b.host.Get(ctx, client.ObjectKey{Namespace: scNamespace, Name: name}, u); err != nil {
			return nil, err
		}
		patch := client.MergeFrom(u.DeepCopy())
		if err := unstructured.SetNestedField(u.Object, int64(2*len(members)), "spec", "totalReplicas"); err != nil {
			return nil, err
		}
		if err := b.host.Patch(ctx, u, patch); err != nil {
			return nil, fmt.Errorf("scaling RSP %s: %w", name, err)
		}
		before[name], _, _ = unstructured.NestedFieldCopy(u.Object, "spec", "clusters")
	}
	cl, err := b.l.Client(member)
	if err != nil {
		return nil, err
	}
	after := scAfter()
	unsched := map[string]time.Time{} // workload -> earliest Unschedulable
	shifted := map[string]time.Time{}
	err = pollEvery(ctx, after+3*time.Minute, scDecisionPace, fmt.Sprintf("%d RSPs shifted", b.o.exhaustRSPs), func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(scNamespace), client.MatchingFields{"status.phase": string(corev1.PodPending)}); err == nil {
			for _, p := range pods.Items {
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
						app := p.Labels["app"]
						if t, ok := unsched[app]; !ok || c.LastTransitionTime.Time.Before(t) {
							unsched[app] = c.LastTransitionTime.Time
						}
					}
				}
			}
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(rspGVK.GroupVersion().WithKind(rspGVK.Kind + "List"))
		if err := b.host.List(ctx, list, client.InNamespace(scNamespace)); err != nil {
			return false, err.Error(), nil //nolint:nilerr // a failed read is retried until the deadline
		}
		now := time.Now()
		for i := range list.Items {
			name := list.Items[i].GetName()
			old, ok := before[name]
			if _, done := shifted[name]; !ok || done {
				continue
			}
			cur, _, _ := unstructured.NestedFieldCopy(list.Items[i].Object, "spec", "clusters")
			if !reflect.DeepEqual(old, cur) {
				shifted[name] = now
			}
		}
		return len(shifted) == len(before), fmt.Sprintf("%d/%d shifted, %d seen Unschedulable", len(shifted), len(before), len(unsched)), nil
	})
	if err != nil {
		b.progress("  %v", err)
	}
	var samples []float64
	missing := 0
	for name := range before {
		at, ok1 := shifted[name]
		since, ok2 := unsched[name]
		if !ok1 || !ok2 {
			missing++
			continue
		}
		samples = append(samples, at.Sub(since.Add(after)).Seconds())
	}
	return latency(samples, missing), nil
}

// scAfter is the policy's capacityExhaustedAfter.
func scAfter() time.Duration { return rbBenchPolicy.CapacityExhaustedAfter.Get() }
