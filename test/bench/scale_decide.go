package bench

import (
	"context"
	"fmt"
	"github.com/fedfailover/fedfailover/internal/fencing"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/test/lab"
)

// powerOffs powers off o.powerOffs lab nodes one second apart (members
// round-robin, each member keeps one lab node on) with Machine evidence and
// times each from the loss rule turning true to the out-of-service taint
// (scTaintClock); sharded, also by the role of the replica holding each
// node's member (role).
func (b *scBench) powerOffs(ctx context.Context, role func(member string) string) (*scLatency, map[string]*scLatency, error) {
	if b.o.powerOffs == 0 {
		return latency(nil, 0), nil, nil
	}
	members := b.l.Members()
	b.progress("powering off %d lab nodes one after another (Machine evidence)", b.o.powerOffs)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		samples []float64
		missing int
		byRoleS = map[string][]float64{}
		byRoleM = map[string]int{}
	)
	for i := 0; i < b.o.powerOffs; i++ {
		member := members[i%len(members)]
		node := lab.NodeName(member, i/len(members)+1)
		clock, stop, err := b.watchNode(ctx, member, node)
		if err != nil {
			return nil, nil, err
		}
		if err := b.l.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
			stop()
			return nil, nil, err
		}
		held := role(member)
		evidence := time.Now()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer stop()
			s, err := b.timeTaint(ctx, clock, evidence)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				b.progress("  %s: %v", node, err)
				missing++
				if held != "" {
					byRoleM[held]++
				}
				return
			}
			b.progress("  %s: loss rule true -> taint %.3fs%s", node, s, heldSuffix(held))
			samples = append(samples, s)
			if held != "" {
				byRoleS[held] = append(byRoleS[held], s)
			}
		}()
		if err := sleepCtx(ctx, time.Second); err != nil {
			return nil, nil, err
		}
	}
	wg.Wait()
	return latency(samples, missing), byRole(byRoleS, byRoleM), nil
}

// heldSuffix says, sharded, which replica's role held the member.
func heldSuffix(role string) string {
	if role == "" {
		return ""
	}
	return " (member held by the " + role + ")"
}

// watchNode starts the watch of one node that times it.
func (b *scBench) watchNode(ctx context.Context, member, node string) (*scTaintClock, context.CancelFunc, error) {
	cfg, err := b.restConfig(member)
	if err != nil {
		return nil, nil, err
	}
	clock := newTaintClock(b.o.notReadyFor, fencing.SilenceWindow(time.Duration(b.l.Options().NodeLeaseSeconds)*time.Second))
	wctx, stop := context.WithCancel(ctx)
	if err := scWatch(wctx, cfg, &corev1.Node{}, "", fields.OneTermEqualSelector("metadata.name", node), clock.observe); err != nil {
		stop()
		return nil, nil, err
	}
	return clock, stop, nil
}

// timeTaint waits for the node's taint and returns the seconds from the
// loss rule turning true to it.
func (b *scBench) timeTaint(ctx context.Context, clock *scTaintClock, evidence time.Time) (float64, error) {
	wait, cancel := context.WithTimeout(ctx, scGrace+b.o.notReadyFor+90*time.Second)
	defer cancel()
	select {
	case <-clock.done:
	case <-wait.Done():
	}
	return clock.latency(evidence)
}

// exhaustion cordons the last member's lab nodes, scales o.exhaustRSPs RSPs
// up by one replica per member and times each from its rule turning true
// (its new replica's Unschedulable transition + capacityExhaustedAfter) to
// fedfailover's first change of the RSP's clusters (scShiftClock).
func (b *scBench) exhaustion(ctx context.Context, role func(member string) string) (*scLatency, string, error) {
	if b.o.exhaustRSPs == 0 {
		return latency(nil, 0), "", nil
	}
	members := b.l.Members()
	member := members[len(members)-1]
	held := role(member)
	clock := newShiftClock(scAfter())
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	memberCfg, err := b.restConfig(member)
	if err != nil {
		return nil, "", err
	}
	if err := scWatch(wctx, memberCfg, &corev1.Pod{}, scNamespace, fields.OneTermEqualSelector("status.phase", string(corev1.PodPending)), clock.observePod); err != nil {
		return nil, "", err
	}
	if err := scWatch(wctx, b.hostCfg, &fedschedv1a1.ReplicaSchedulingPreference{}, scNamespace, nil, clock.observeRSP); err != nil {
		return nil, "", err
	}
	b.progress("exhausting %s%s (its lab nodes cordoned) and scaling %d RSPs up", member, heldSuffix(held), b.o.exhaustRSPs)
	if err := b.l.ExhaustCapacity(ctx, member, lab.ExhaustCordon); err != nil {
		return nil, "", err
	}
	for i := 0; i < b.o.exhaustRSPs; i++ {
		name := fmt.Sprintf("%s-%d", scWorkload, i)
		rsp := &fedschedv1a1.ReplicaSchedulingPreference{}
		if err := b.host.Get(ctx, client.ObjectKey{Namespace: scNamespace, Name: name}, rsp); err != nil {
			return nil, "", err
		}
		patch := client.MergeFrom(rsp.DeepCopy())
		rsp.Spec.TotalReplicas = int32(2 * len(members))
		if err := b.host.Patch(ctx, rsp, patch); err != nil {
			return nil, "", fmt.Errorf("scaling RSP %s: %w", name, err)
		}
		clock.expect(name, rsp.Spec.Clusters)
	}
	err = pollEvery(ctx, clock.after+3*time.Minute, scWaitPace, fmt.Sprintf("%d RSPs shifted", b.o.exhaustRSPs), func(context.Context) (bool, string, error) {
		ok, why := clock.progress()
		return ok, why, nil
	})
	if err != nil {
		b.progress("  %v", err)
	}
	samples, missing := clock.samples()
	return latency(samples, missing), held, nil
}

// scWaitPace is how often the bench looks whether the watches saw every
// decision; the times themselves come from the watches.
const scWaitPace = 100 * time.Millisecond

// scAfter is the policy's capacityExhaustedAfter.
func scAfter() time.Duration { return rbBenchPolicy.CapacityExhaustedAfter.Get() }
