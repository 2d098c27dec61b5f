package chaos

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fedv1b1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/cli"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/test/lab"
)

// undo reverts one fault.
type undo func(context.Context) error

func noUndo(context.Context) error { return nil }

// apply injects f and records it in the truth; the returned undo reverts
// it. Spans open before a fault that may kill something takes effect and
// close after an undo that revives it has returned, so the truth never
// claims a process was dead while it might have lived.
func (c *Campaign) apply(ctx context.Context, tr *Truth, f Fault) (undo, error) {
	now := time.Now
	switch f.Kind {
	case PowerOff, Replace:
		ev := lab.Evidence(f.Evidence)
		if f.Kind == Replace {
			ev = lab.EvidenceMachineDeleted
		}
		late := f.Kind == PowerOff && f.EvidenceAfter > 0 && ev != lab.EvidenceNone
		atOnce := ev
		if late {
			atOnce = lab.EvidenceNone
		}
		tr.Open(keyFault+f.Cluster, now())
		if atOnce != lab.EvidenceNone {
			tr.Open(keyEvidence+f.Node, now())
		}
		if err := c.lab.PowerOff(ctx, f.Node, atOnce); err != nil {
			return nil, err
		}
		offAt := now()
		tr.Close(keyAlive+f.Node, offAt)
		stopLate := func() {}
		if late {
			stopLate = c.writeEvidenceLater(ctx, tr, f.Node, ev, f.EvidenceAfter)
		}
		return func(ctx context.Context) error {
			stopLate() // no evidence written after the power-on starts
			on := c.lab.Restore
			if f.Kind == Replace {
				on = c.lab.Replace
			}
			err := c.fence.powerOn(ctx, tr, f.Cluster, f.Node, func(ctx context.Context) error { return on(ctx, f.Node) })
			if err == nil {
				tr.Close(keyFault+f.Cluster, now())
				tr.Close(keyEvidence+f.Node, now()) // cleared before the node's kwok started
			}
			return err
		}, nil
	case EvidenceAlive:
		// The node stays alive in the truth: any act on it breaks I1.
		tr.Open(keyEvidence+f.Node, now())
		if err := c.lab.ApplyEvidence(ctx, f.Node, lab.Evidence(f.Evidence)); err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			// Clears the evidence; the kwok runs on, unless the fence agent
			// killed it meanwhile (a slow remediation of an earlier
			// partition): then it is powered on, and alive again in the truth.
			err := c.fence.powerOn(ctx, tr, f.Cluster, f.Node, func(ctx context.Context) error { return c.lab.Restore(ctx, f.Node) })
			if err == nil {
				tr.Close(keyEvidence+f.Node, now())
			}
			return err
		}, nil
	case Partition:
		tr.Open(keyFault+f.Cluster, now())
		c.fence.play(f.Node, f.Remediation)
		if err := c.lab.Partition(f.Node); err != nil {
			return nil, err
		}
		tr.Open(keyFrozen+f.Node, now()) // once the stop has taken effect
		return func(ctx context.Context) error {
			err := c.fence.endPartition(ctx, tr, f.Cluster, f.Node)
			if err == nil {
				tr.Close(keyFault+f.Cluster, now())
			}
			return err
		}, nil
	case APIKill, EtcdStop:
		tr.Open(keyFault+f.Cluster, now())
		tr.Open(keyDown+f.Cluster, now())
		kill, start := c.lab.KillAPIServer, c.lab.RestartAPIServer
		if f.Kind == EtcdStop {
			kill, start = c.lab.StopEtcd, c.lab.StartEtcd
		}
		if err := kill(f.Cluster); err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			err := start(ctx, f.Cluster)
			if err == nil {
				tr.Close(keyDown+f.Cluster, now())
				tr.Close(keyFault+f.Cluster, now())
			}
			return err
		}, nil
	case ManagerKill:
		if err := c.killManager(tr); err != nil {
			return nil, err
		}
		return func(context.Context) error { return c.startManager(tr) }, nil
	case ManagerKillMidAction:
		// Wait for fedfailover to be in the middle of something, then kill.
		what := c.waitMidAction(ctx, f.Hold)
		c.logf("    kill -9 %s", what)
		if err := c.killManager(tr); err != nil {
			return nil, err
		}
		return func(context.Context) error { return c.startManager(tr) }, nil
	case MemberCut:
		tr.Open(keyCut+f.Cluster, now())
		c.iso.Cut(c.addr[f.Cluster])
		return func(context.Context) error {
			if err := c.iso.Forward(c.addr[f.Cluster]); err != nil {
				return err
			}
			tr.Close(keyCut+f.Cluster, now())
			return nil
		}, nil
	case CredentialRotation:
		tr.Mark(keyCredential+f.Cluster, now())
		if err := c.rotateCredential(ctx, f.Cluster); err != nil {
			return nil, err
		}
		tr.Mark(keyCredential+f.Cluster, now())
		return noUndo, nil
	case Capacity:
		tr.Open(keyFault+f.Cluster, now())
		if err := c.lab.ExhaustCapacity(ctx, f.Cluster, f.Mode); err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			err := c.lab.RestoreCapacity(ctx, f.Cluster)
			if err == nil {
				tr.Close(keyFault+f.Cluster, now())
			}
			return err
		}, nil
	case PolicyEdit:
		noWrites := f.Edit == EditPause || f.Edit == EditDryRun
		if noWrites {
			tr.Open(keyNoWrites, now())
		}
		if err := c.editPolicy(ctx, f.Edit); err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			err := c.resetPolicy(ctx, livePolicy)
			if err == nil && noWrites {
				tr.Close(keyNoWrites, now())
			}
			return err
		}, nil
	case ForgedMarks:
		return noUndo, c.forgeMarks(ctx, f.Cluster, f.Node)
	case RebalanceState:
		return c.loseRebalanceState(ctx, f.Mode)
	case PodFinalizer:
		if err := c.holdPods(ctx, f.Cluster, f.Node); err != nil {
			return nil, err
		}
		return func(ctx context.Context) error { return c.releasePods(ctx, f.Cluster) }, nil
	}
	return nil, fmt.Errorf("unknown fault kind %q", f.Kind)
}

// writeEvidenceLater writes ev on node's Machine after d (from now), as
// an infrastructure provider that reports a power-off late; the returned
// stop cancels a write not yet made and waits for one under way.
func (c *Campaign) writeEvidenceLater(ctx context.Context, tr *Truth, node string, ev lab.Evidence, d time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		tr.Open(keyEvidence+node, time.Now())
		if err := c.lab.ApplyEvidence(ctx, node, ev); err != nil {
			c.logf("    late evidence %s on %s: %v", ev, node, err)
			return
		}
		c.logf("    late evidence %s written on %s", ev, node)
	}()
	return func() {
		cancel()
		<-done
	}
}

// kwokStarted is when the node's kwok process was last started.
func (c *Campaign) kwokStarted(cluster, node string) (time.Time, error) {
	st, err := c.lab.State()
	if err != nil {
		return time.Time{}, err
	}
	p := st.Proc(cluster + "/" + lab.CompKwok + "/" + node)
	if p == nil || p.StartedAt.IsZero() {
		return time.Time{}, fmt.Errorf("no start time of %s's kwok", node)
	}
	return p.StartedAt, nil
}

// waitMidAction polls, up to d, for fedfailover in the middle of an act: a
// NodeRecovery between intent and finish, or an RSP off its baseline (a
// shift, a make-before-break or a failback under way).
func (c *Campaign) waitMidAction(ctx context.Context, d time.Duration) string {
	what := "at the end of the wait (nothing in progress)"
	_ = until(ctx, d, "fedfailover mid-action", func(ctx context.Context) (bool, string) {
		var recs v1alpha1.NodeRecoveryList
		if err := c.host.List(ctx, &recs); err == nil {
			for _, r := range recs.Items {
				if r.Status.Phase != v1alpha1.RecoveryPhaseFinished && r.Status.Phase != v1alpha1.RecoveryPhaseBlocked && r.Status.IntentAt != nil {
					what = fmt.Sprintf("during the recovery of %s/%s (%s)", r.Spec.Cluster, r.Spec.Node, r.Status.Phase)
					return true, ""
				}
			}
		}
		for w, base := range c.rspBaseline {
			ns, name := splitKey(w)
			var rsp fedschedv1a1.ReplicaSchedulingPreference
			if err := c.host.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &rsp); err == nil &&
				!equalClusters(rsp.Spec.Clusters, base.Clusters) {
				what = fmt.Sprintf("with RSP %s shifted to %s", w, cli.FormatClusters(rsp.Spec.Clusters))
				return true, ""
			}
		}
		return false, ""
	})
	return what
}

func equalClusters(a, b map[string]fedschedv1a1.ClusterPreferences) bool {
	return maps.EqualFunc(a, b, func(x, y fedschedv1a1.ClusterPreferences) bool {
		return x.Weight == y.Weight && ptr.Equal(x.MaxReplicas, y.MaxReplicas) && x.MinReplicas == y.MinReplicas
	})
}

// rotateCredential issues a new token for the service account behind a
// member's KubeFedCluster Secret and writes it into that Secret, as an
// administrator rotating the credential does.
func (c *Campaign) rotateCredential(ctx context.Context, member string) error {
	var kfc fedv1b1.KubeFedCluster
	if err := c.host.Get(ctx, client.ObjectKey{Namespace: lab.KubefedNS, Name: member}, &kfc); err != nil {
		return err
	}
	var secret corev1.Secret
	if err := c.host.Get(ctx, client.ObjectKey{Namespace: lab.KubefedNS, Name: kfc.Spec.SecretRef.Name}, &secret); err != nil {
		return err
	}
	ns, sa, err := tokenSubject(string(secret.Data["token"]))
	if err != nil {
		return fmt.Errorf("secret %s: %w", secret.Name, err)
	}
	req := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}
	acct := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}
	if err := c.clients[member].SubResource("token").Create(ctx, acct, req); err != nil {
		return fmt.Errorf("token for %s/%s: %w", ns, sa, err)
	}
	patch := client.MergeFrom(secret.DeepCopy())
	secret.Data["token"] = []byte(req.Status.Token)
	return c.host.Patch(ctx, &secret, patch)
}

// tokenSubject reads the service account a token was issued for.
func tokenSubject(token string) (ns, name string, err error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", "", fmt.Errorf("not a JWT")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", "", err
	}
	var claims struct {
		Sub string `json:"sub"`
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		return "", "", err
	}
	rest, ok := strings.CutPrefix(claims.Sub, "system:serviceaccount:")
	ns, name, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 {
		return "", "", fmt.Errorf("subject %q is no service account", claims.Sub)
	}
	return ns, name, nil
}

// editPolicy changes the live policy as an administrator might mid-incident.
func (c *Campaign) editPolicy(ctx context.Context, edit string) error {
	var p v1alpha1.FailoverPolicy
	if err := c.host.Get(ctx, client.ObjectKey{Name: livePolicy}, &p); err != nil {
		return err
	}
	switch edit {
	case EditDelete:
		return c.host.Delete(ctx, &p)
	case EditDeleteForeground:
		return c.host.Delete(ctx, &p, client.PropagationPolicy(metav1.DeletePropagationForeground))
	}
	patch := client.MergeFrom(p.DeepCopy())
	switch edit {
	case EditDryRun:
		p.Spec.DryRun = true
	case EditPause:
		p.Spec.Paused = true
	case EditSelector:
		// A selector no member matches: the policy governs nothing.
		p.Spec.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"chaos.fedfailover.io/none": "true"}}
	default:
		return fmt.Errorf("unknown edit %q", edit)
	}
	return c.host.Patch(ctx, &p, patch)
}

// resetPolicy brings a policy back to its spec at setup (policyBaseline):
// recreated when deleted (after its finalizers let it go), its spec
// restored otherwise. The baseline is the spec as the API server stored it,
// defaults included: a policy re-created from its manifest decoded into Go
// would carry every omitted boolean as an explicit false, so both jobs
// would come back disabled (and every later run would prove nothing).
func (c *Campaign) resetPolicy(ctx context.Context, name string) error {
	want, ok := c.policyBaseline[name]
	if !ok {
		return fmt.Errorf("no baseline for policy %s", name)
	}
	return until(ctx, 3*time.Minute, "policy "+name+" restored", func(ctx context.Context) (bool, string) {
		var p v1alpha1.FailoverPolicy
		err := c.host.Get(ctx, client.ObjectKey{Name: name}, &p)
		switch {
		case apierrors.IsNotFound(err):
			fresh := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: *want.DeepCopy()}
			err = c.host.Create(ctx, fresh)
			return err == nil, fmt.Sprint(err)
		case err != nil:
			return false, err.Error()
		case p.DeletionTimestamp != nil:
			return false, "still being deleted (finalizers " + strings.Join(p.Finalizers, ",") + ")"
		}
		patch := client.MergeFrom(p.DeepCopy())
		p.Spec = *want.DeepCopy()
		err = c.host.Patch(ctx, &p, patch)
		return err == nil, fmt.Sprint(err)
	})
}

// forgeMarks writes fedfailover's old recovery annotations onto a Node, as
// anyone with Node write access could: a claim that the node was fenced and
// acted on. fedfailover must treat them as hints, never as authority.
func (c *Campaign) forgeMarks(ctx context.Context, member, node string) error {
	cl := c.clients[member]
	var n corev1.Node
	if err := cl.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		return err
	}
	patch := client.MergeFrom(n.DeepCopy())
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	maps.Copy(n.Annotations, contract.NodeMarks{LostSince: time.Now().Add(-time.Minute), FencedBy: "MachineInfrastructureDeleted",
		FencedAt: time.Now().Add(-30 * time.Second), Action: v1alpha1.RecoveryMethodForceDelete, TaintedByUs: true,
		Claims: []string{dbNamespace + "/" + lab.VolumeTemplateName + "-" + dbName + "-0"}}.Annotations())
	return cl.Patch(ctx, &n, patch)
}

// liveRSP is the live policy's RSP (chaos-web/web).
var liveRSP = client.ObjectKey{Namespace: "chaos-web", Name: "web"}

// loseRebalanceState deletes the live RSP's RebalanceRecord (restored
// from the copy taken before, as a backup would, after the hold unless
// fedfailover wrote a new one meanwhile) or writes garbage into the legacy
// state annotation, as someone else's hand would.
func (c *Campaign) loseRebalanceState(ctx context.Context, mode string) (undo, error) {
	switch mode {
	case StateRecordDeleted:
		rec := &v1alpha1.RebalanceRecord{}
		if err := c.host.Get(ctx, liveRSP, rec); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		if err := c.host.Delete(ctx, rec); client.IgnoreNotFound(err) != nil {
			return nil, err
		}
		backup := &v1alpha1.RebalanceRecord{ObjectMeta: metav1.ObjectMeta{Namespace: rec.Namespace, Name: rec.Name}, Spec: *rec.Spec.DeepCopy()}
		return func(ctx context.Context) error {
			return client.IgnoreAlreadyExists(c.host.Create(ctx, backup))
		}, nil
	case StateAnnotationGarbage:
		var rsp fedschedv1a1.ReplicaSchedulingPreference
		if err := c.host.Get(ctx, liveRSP, &rsp); err != nil {
			return nil, err
		}
		patch := client.MergeFrom(rsp.DeepCopy())
		if rsp.Annotations == nil {
			rsp.Annotations = map[string]string{}
		}
		rsp.Annotations[contract.AnnotationRebalance] = `{"v":1,"baseline":{"totalReplicas":600},"lastChange":"2999-01-01T00:00:00Z","members":{"member1":{"backoff":40}`
		return noUndo, c.host.Patch(ctx, &rsp, patch)
	}
	return nil, fmt.Errorf("unknown rebalance state fault %q", mode)
}

// chaosFinalizer is the foreign finalizer PodFinalizer puts on pods.
const chaosFinalizer = "chaos.fedfailover.io/hold"

// holdPods puts chaosFinalizer on every pod bound to node.
func (c *Campaign) holdPods(ctx context.Context, member, node string) error {
	var pods corev1.PodList
	if err := c.clients[member].List(ctx, &pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || slices.Contains(p.Finalizers, chaosFinalizer) {
			continue
		}
		patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
		p.Finalizers = append(p.Finalizers, chaosFinalizer)
		if err := c.clients[member].Patch(ctx, p, patch); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}

// releasePods takes chaosFinalizer off every pod of member that has it.
func (c *Campaign) releasePods(ctx context.Context, member string) error {
	return until(ctx, time.Minute, "foreign finalizers off "+member+"'s pods", func(ctx context.Context) (bool, string) {
		var pods corev1.PodList
		if err := c.clients[member].List(ctx, &pods); err != nil {
			return false, err.Error()
		}
		left := 0
		for i := range pods.Items {
			p := &pods.Items[i]
			if !slices.Contains(p.Finalizers, chaosFinalizer) {
				continue
			}
			patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
			p.Finalizers = slices.DeleteFunc(p.Finalizers, func(f string) bool { return f == chaosFinalizer })
			if err := c.clients[member].Patch(ctx, p, patch); client.IgnoreNotFound(err) != nil {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d pods still held", left)
	})
}
