package members

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/controllers/noderecovery"
	"github.com/fedfailover/fedfailover/internal/policystatus"
)

const (
	mConnected  = "fedfailover_member_connected"
	mObjects    = "fedfailover_member_cache_objects"
	mProbe      = "fedfailover_member_probe_duration_seconds"
	mDisconnect = "fedfailover_member_disconnects_total"
)

func TestConnectWithinProbePeriod(t *testing.T) {
	f := env(t)
	opts := testOptions()
	opts.ProbePeriod = 3 * time.Second
	h := startManager(t, f, opts)
	ctx := context.Background()

	eu := policy(t, f, "eu-only", &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}})
	all := policy(t, f, "all-members", nil)
	f.join(t, "alpha", "alpha", map[string]string{"region": "eu"})
	f.join(t, "beta", "beta", map[string]string{"region": "us"})
	h.waitState(t, opts.ProbePeriod, "alpha", true, member.ReasonConnected)
	h.waitState(t, opts.ProbePeriod, "beta", true, member.ReasonConnected)

	// Reads of cached kinds come from the member cache, which follows the member.
	node := readyNode(t, f.members["alpha"], "alpha-n1")
	c, err := h.cache.GetClient(ctx, "alpha")
	must(t, err)
	eventually(t, 5*time.Second, "node in alpha's cache", func() error {
		return c.Get(ctx, client.ObjectKeyFromObject(node), &corev1.Node{})
	})
	// Kinds not cached are read live.
	var nss corev1.NamespaceList
	must(t, c.List(ctx, &nss))
	if len(nss.Items) == 0 {
		t.Fatal("live read of namespaces returned nothing")
	}
	v, err := h.cache.ServerVersion("alpha")
	must(t, err)
	if !strings.HasPrefix(v.GitVersion, "v1.37.") {
		t.Errorf("server version %q, want v1.37.x", v.GitVersion)
	}
	if _, err := h.cache.GetClient(ctx, "gamma"); !errors.Is(err, member.ErrNotConnected) {
		t.Errorf("unknown member: got %v, want ErrNotConnected", err)
	}
	if got, ok := series(t, mConnected, "alpha"); !ok || got != 1 {
		t.Errorf("%s{cluster=alpha} = %v (present %v), want 1", mConnected, got, ok)
	}
	eventually(t, 5*time.Second, "Connected event", func() error {
		for _, e := range f.events(t, "alpha") {
			if e.Reason == member.ReasonConnected && e.Type == corev1.EventTypeNormal {
				return nil
			}
		}
		return errors.New("no Connected event for alpha")
	})
	eventually(t, 3*opts.ProbePeriod, "probe and object metrics", func() error {
		if n, ok := series(t, mProbe, "alpha", "result", "success"); !ok || n == 0 {
			return errors.New("no successful probe recorded")
		}
		if n, _ := series(t, mObjects, "alpha", "kind", "Node"); n != 1 {
			return errorf("cached nodes = %v, want 1", n)
		}
		return nil
	})

	// FailoverPolicy status: each policy lists the members its selector picks.
	waitPolicy(t, f, eu, func(p *v1alpha1.FailoverPolicy) error {
		if len(p.Status.Members) != 1 || p.Status.Members[0].Name != "alpha" || !p.Status.Members[0].Connected {
			return errorf("members %+v", p.Status.Members)
		}
		m := p.Status.Members[0]
		if m.NodesTotal != 1 || m.NodesReady != 1 || m.LastProbeTime == nil || !strings.HasPrefix(m.ServerVersion, "v1.37.") {
			return errorf("member status %+v", m)
		}
		return wantCondition(p, metav1.ConditionTrue, v1alpha1.ReasonAllConnected)
	})
	waitPolicy(t, f, all, func(p *v1alpha1.FailoverPolicy) error {
		if p.Status.ConnectedMembers != 2 || len(p.Status.Members) != 2 {
			return errorf("connectedMembers %d, members %+v", p.Status.ConnectedMembers, p.Status.Members)
		}
		return wantCondition(p, metav1.ConditionTrue, v1alpha1.ReasonAllConnected)
	})
}

func TestUnjoinTearsDownWithoutLeak(t *testing.T) {
	f := env(t)
	h := startManager(t, f, testOptions())
	ctx := context.Background()

	// Warm up everything that starts once per manager (event broadcaster,
	// host watches) with a first member, so only beta's goroutines differ.
	f.join(t, "alpha", "alpha", nil)
	h.waitState(t, 10*time.Second, "alpha", true, member.ReasonConnected)
	eventually(t, 5*time.Second, "alpha Connected event", func() error {
		if len(f.events(t, "alpha")) == 0 {
			return errors.New("none")
		}
		return nil
	})
	before := goleak.IgnoreCurrent()

	b := f.join(t, "beta", "beta", nil)
	h.waitState(t, 10*time.Second, "beta", true, member.ReasonConnected)
	c, err := h.cache.GetClient(ctx, "beta")
	must(t, err)
	var pods corev1.PodList
	must(t, c.List(ctx, &pods))
	eventually(t, 5*time.Second, "beta metrics", func() error {
		if _, ok := series(t, mConnected, "beta"); !ok {
			return errors.New("no connected series for beta")
		}
		return nil
	})

	f.unjoin(t, b)
	eventually(t, 10*time.Second, "beta torn down", func() error {
		if _, err := h.cache.GetClient(ctx, "beta"); !errors.Is(err, member.ErrNotConnected) {
			return errorf("GetClient(beta) = %v", err)
		}
		for _, name := range []string{mConnected, mObjects, mProbe} {
			if _, ok := series(t, name, "beta"); ok {
				return errorf("%s{cluster=beta} still present", name)
			}
		}
		return nil
	})
	if !h.cache.Connected("alpha") {
		t.Error("alpha disconnected by beta's unjoin")
	}
	eventually(t, 10*time.Second, "no goroutine of beta left", func() error {
		utilnet.CloseIdleConnectionsFor(f.members["beta"].http.Transport) // the test's own
		// Controller workers start on demand, up to MaxConcurrentReconciles.
		return goleak.Find(before, goleak.IgnoreAnyFunction(
			"sigs.k8s.io/controller-runtime/pkg/internal/controller.(*Controller[...]).processNextWorkItem"))
	})
	eventually(t, 5*time.Second, "Unjoined event", func() error {
		for _, e := range f.events(t, "beta") {
			if e.Reason == member.ReasonUnjoined {
				return nil
			}
		}
		return errors.New("no Unjoined event")
	})
}

func TestBadCredentialsAndRecovery(t *testing.T) {
	f := env(t)
	h := startManager(t, f, testOptions())
	ctx := context.Background()
	pol := policy(t, f, "bad-input", nil)

	a := f.join(t, "alpha", "alpha", nil)
	b := f.join(t, "beta", "beta", nil)
	h.waitState(t, 10*time.Second, "alpha", true, member.ReasonConnected)
	h.waitState(t, 10*time.Second, "beta", true, member.ReasonConnected)
	alphaWorks := func() {
		t.Helper()
		if !h.cache.Connected("alpha") {
			t.Fatal("alpha lost its connection because of beta")
		}
		c, err := h.cache.GetUncachedClient(ctx, "alpha")
		must(t, err)
		var nodes corev1.NodeList
		must(t, c.List(ctx, &nodes))
	}

	// Token rotated to garbage: the Secret change reconnects, and fails.
	tokens.add("not-a-valid-token")
	setToken(t, f, b, "not-a-valid-token")
	h.waitState(t, 10*time.Second, "beta", false, member.ReasonUnauthorized)
	alphaWorks()
	waitPolicy(t, f, pol, func(p *v1alpha1.FailoverPolicy) error {
		for _, m := range p.Status.Members {
			if m.Name == "beta" && !m.Connected && m.Reason == member.ReasonUnauthorized {
				return wantCondition(p, metav1.ConditionFalse, v1alpha1.ReasonMembersNotConnected)
			}
		}
		return errorf("members %+v", p.Status.Members)
	})
	eventually(t, 5*time.Second, "Unauthorized event", func() error {
		for _, e := range f.events(t, "beta") {
			if e.Reason == member.ReasonUnauthorized && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return errors.New("no Unauthorized warning event for beta")
	})

	// Secret gone.
	must(t, f.host.Delete(ctx, b.secret))
	h.waitState(t, 10*time.Second, "beta", false, member.ReasonSecretNotFound)

	// Secret back with a token whose account may do nothing.
	weak := f.memberToken(t, f.members["beta"], "weak", nil)
	b.secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kubefedNS, Name: b.secret.Name},
		Data: map[string][]byte{"token": []byte(weak)}}
	must(t, f.host.Create(ctx, b.secret))
	h.waitState(t, 10*time.Second, "beta", false, member.ReasonForbidden)

	// Fixed Secret: reconnects.
	setToken(t, f, b, b.token)
	h.waitState(t, 10*time.Second, "beta", true, member.ReasonConnected)

	// Wrong CA (alpha's), then an endpoint nobody listens on.
	patchKFC(t, f, b, func(k *kubefedv1beta1.KubeFedCluster) { k.Spec.CABundle = f.members["alpha"].cfg.CAData })
	h.waitState(t, 10*time.Second, "beta", false, member.ReasonTLSError)
	alphaWorks()
	patchKFC(t, f, b, func(k *kubefedv1beta1.KubeFedCluster) {
		k.Spec.CABundle = f.members["beta"].cfg.CAData
		k.Spec.APIEndpoint = "https://127.0.0.1:1"
	})
	h.waitState(t, 10*time.Second, "beta", false, member.ReasonUnreachable)
	alphaWorks()
	patchKFC(t, f, b, func(k *kubefedv1beta1.KubeFedCluster) { k.Spec.APIEndpoint = f.members["beta"].cfg.Host })
	h.waitState(t, 10*time.Second, "beta", true, member.ReasonConnected)
	waitPolicy(t, f, pol, func(p *v1alpha1.FailoverPolicy) error {
		if p.Status.ConnectedMembers != 2 {
			return errorf("connectedMembers %d", p.Status.ConnectedMembers)
		}
		return wantCondition(p, metav1.ConditionTrue, v1alpha1.ReasonAllConnected)
	})

	// The failures were logged (so the token check of startManager's
	// cleanup looks at real error lines), and no token is anywhere users look.
	for _, want := range []string{member.ReasonUnauthorized, member.ReasonForbidden, member.ReasonTLSError, member.ReasonUnreachable} {
		if !strings.Contains(h.logs.String(), `"reason":"`+want+`"`) {
			t.Errorf("no log line with reason %s", want)
		}
	}
	var p v1alpha1.FailoverPolicy
	must(t, f.host.Get(ctx, client.ObjectKeyFromObject(pol), &p))
	seen := []string{p.Status.Conditions[0].Message}
	for _, e := range append(f.events(t, "alpha"), f.events(t, "beta")...) {
		seen = append(seen, e.Note)
	}
	for _, tok := range append(tokens.list(), a.token) {
		for _, s := range seen {
			if strings.Contains(s, tok) {
				t.Fatalf("token leaked in %q", s)
			}
		}
	}
}

func TestProbeFailureThresholdAndRestart(t *testing.T) {
	f := env(t)
	opts := testOptions()
	h := startManager(t, f, opts)
	ctx := context.Background()
	beta := f.members["beta"]

	f.join(t, "beta", "beta", nil)
	h.waitState(t, 10*time.Second, "beta", true, member.ReasonConnected)
	before := readyNode(t, beta, "beta-before")

	stopped := time.Now()
	must(t, beta.env.ControlPlane.APIServer.Stop())
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = beta.env.ControlPlane.APIServer.Start()
		}
	})
	// The threshold makes beta ProbeFailed, counted once. Its watches are
	// silent too, so SyncStallTimeout later the cache is torn down and the
	// reconnect attempts read Unreachable: an APIServer.Stop that takes a
	// while can hide the first state from a poll, never the count.
	eventually(t, 40*time.Second, "beta disconnected by the probe threshold", func() error {
		st := h.cache.MemberStatuses(ctx, []string{"beta"})[0]
		if v, _ := series(t, mDisconnect, "beta", "reason", member.ReasonProbeFailed); st.Connected || v == 0 {
			return errorf("connected=%v reason=%s %s{reason=ProbeFailed}=%v", st.Connected, st.Reason, mDisconnect, v)
		}
		if st.Reason != member.ReasonProbeFailed && st.Reason != member.ReasonUnreachable {
			return errorf("reason %s, want ProbeFailed (or Unreachable once torn down)", st.Reason)
		}
		return nil
	})
	// The first probe may fail at once; the threshold needs (n-1) more periods.
	if min := time.Duration(opts.FailureThreshold-1)*opts.ProbePeriod - 200*time.Millisecond; time.Since(stopped) < min {
		t.Errorf("disconnected %s after the stop, before %d failed probes (%s)", time.Since(stopped), opts.FailureThreshold, min)
	}
	if v, _ := series(t, mConnected, "beta"); v != 0 {
		t.Errorf("%s{cluster=beta} = %v while down", mConnected, v)
	}
	if v, _ := series(t, mDisconnect, "beta", "reason", member.ReasonProbeFailed); v != 1 {
		t.Errorf("%s{reason=ProbeFailed} = %v, want 1", mDisconnect, v)
	}
	if _, err := h.cache.GetReader(ctx, "beta"); !errors.Is(err, member.ErrNotConnected) {
		t.Errorf("GetReader while down: %v", err)
	}

	must(t, beta.env.ControlPlane.APIServer.Start())
	restarted = true
	h.waitState(t, 30*time.Second, "beta", true, member.ReasonConnected)
	after := readyNode(t, beta, "beta-after")
	r, err := h.cache.GetReader(ctx, "beta")
	must(t, err)
	eventually(t, 5*time.Second, "cache resynced", func() error {
		for _, n := range []*corev1.Node{before, after} {
			if err := r.Get(ctx, client.ObjectKeyFromObject(n), &corev1.Node{}); err != nil {
				return err
			}
		}
		return nil
	})
}

// policy creates a FailoverPolicy selecting members, deleted when the test ends.
func policy(t *testing.T, f *federation, name string, sel *metav1.LabelSelector) *v1alpha1.FailoverPolicy {
	t.Helper()
	p := &v1alpha1.FailoverPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.FailoverPolicySpec{
			ClusterSelector: sel,
			NodeRecovery: &v1alpha1.NodeRecoverySpec{NotReadyFor: "60s",
				Fencing: v1alpha1.FencingSpec{MachineInfrastructureDeleted: true}},
		},
	}
	must(t, f.host.Create(context.Background(), p))
	t.Cleanup(func() { _ = f.host.Delete(context.Background(), p) })
	return p
}

func waitPolicy(t *testing.T, f *federation, p *v1alpha1.FailoverPolicy, check func(*v1alpha1.FailoverPolicy) error) {
	t.Helper()
	eventually(t, 10*time.Second, "FailoverPolicy "+p.Name+" status", func() error {
		var got v1alpha1.FailoverPolicy
		if err := f.host.Get(context.Background(), client.ObjectKeyFromObject(p), &got); err != nil {
			return err
		}
		return check(&got)
	})
}

func wantCondition(p *v1alpha1.FailoverPolicy, status metav1.ConditionStatus, reason string) error {
	if err := wantReady(p); err != nil {
		return err
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1alpha1.ConditionMembersConnected {
			if c.Status != status || c.Reason != reason || c.ObservedGeneration != p.Generation {
				return errorf("condition %+v, want %s/%s at generation %d", c, status, reason, p.Generation)
			}
			return nil
		}
	}
	return errorf("no %s condition", v1alpha1.ConditionMembersConnected)
}

// readyNode creates a Ready Node in a member (deleted when the test ends).
func readyNode(t *testing.T, m *memberEnv, name string) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	must(t, m.client.Create(ctx, n))
	t.Cleanup(func() {
		if err := m.client.Delete(context.Background(), n); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting node %s: %v", name, err)
		}
	})
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady"}}
	must(t, m.client.Status().Update(ctx, n))
	return n
}

func setToken(t *testing.T, f *federation, j *joined, token string) {
	t.Helper()
	s := &corev1.Secret{}
	must(t, f.host.Get(context.Background(), client.ObjectKeyFromObject(j.secret), s))
	s.Data = map[string][]byte{"token": []byte(token)}
	must(t, f.host.Update(context.Background(), s))
	j.secret = s
}

func patchKFC(t *testing.T, f *federation, j *joined, mutate func(*kubefedv1beta1.KubeFedCluster)) {
	t.Helper()
	k := &kubefedv1beta1.KubeFedCluster{}
	must(t, f.host.Get(context.Background(), client.ObjectKeyFromObject(j.kfc), k))
	orig := k.DeepCopy()
	mutate(k)
	must(t, f.host.Patch(context.Background(), k, client.MergeFrom(orig)))
}

// wantReady checks the Ready condition and observedGeneration that go with
// every member status: Ready unless the policy selects no member.
func wantReady(p *v1alpha1.FailoverPolicy) error {
	if p.Status.ObservedGeneration != p.Generation {
		return errorf("observedGeneration %d, want %d", p.Status.ObservedGeneration, p.Generation)
	}
	want := metav1.ConditionTrue
	if len(p.Status.Members) == 0 {
		want = metav1.ConditionFalse
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			if c.Status != want || c.ObservedGeneration != p.Generation {
				return errorf("Ready condition %+v, want status %s at generation %d", c, want, p.Generation)
			}
			return nil
		}
	}
	return errorf("no %s condition", v1alpha1.ConditionReady)
}

// TestReadySummarisesEveryController: Ready, written by the member status
// controller, follows the conditions the other controllers write and the
// policy's own selectors.
func TestReadySummarisesEveryController(t *testing.T) {
	f := env(t)
	h := startManager(t, f, testOptions())
	ctx := context.Background()
	f.join(t, "alpha", "alpha", nil)
	h.waitState(t, 10*time.Second, "alpha", true, member.ReasonConnected)
	pol := policy(t, f, "summary", nil)
	ready := func(status metav1.ConditionStatus, reason, msg string) func(*v1alpha1.FailoverPolicy) error {
		return func(p *v1alpha1.FailoverPolicy) error {
			c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, msg) || c.ObservedGeneration != p.Generation {
				return errorf("Ready %+v, want %s/%s with %q at generation %d", c, status, reason, msg, p.Generation)
			}
			return nil
		}
	}
	waitPolicy(t, f, pol, ready(metav1.ConditionTrue, v1alpha1.ReasonEnforcing, ""))

	// Node recovery reports a storm with its own field manager.
	storm := func(status metav1.ConditionStatus, reason, msg string) {
		t.Helper()
		st := v1alpha1.FailoverPolicyStatus{Conditions: []metav1.Condition{{Type: v1alpha1.ConditionStormActive, Status: status,
			Reason: reason, Message: msg, LastTransitionTime: metav1.Now()}}}
		must(t, policystatus.Apply(ctx, f.host, pol.Name, noderecovery.StatusFieldOwner, &st))
	}
	storm(metav1.ConditionTrue, v1alpha1.ReasonStormActive, "alpha: 3 of 5 nodes lost")
	waitPolicy(t, f, pol, ready(metav1.ConditionFalse, v1alpha1.ReasonStormActive, "StormActive: alpha: 3 of 5 nodes lost"))
	waitPolicy(t, f, pol, func(p *v1alpha1.FailoverPolicy) error {
		return wantConditionStatus(p, v1alpha1.ConditionMembersConnected, metav1.ConditionTrue)
	})
	storm(metav1.ConditionFalse, v1alpha1.ReasonNoStorm, "")
	waitPolicy(t, f, pol, ready(metav1.ConditionTrue, v1alpha1.ReasonEnforcing, ""))

	// An unparsable clusterSelector selects nothing and says which field.
	got := &v1alpha1.FailoverPolicy{}
	must(t, f.host.Get(ctx, client.ObjectKeyFromObject(pol), got))
	// Admission rejects unknown operators; an invalid key still gets through.
	got.Spec.ClusterSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "not a key!", Operator: "Exists"}}}
	must(t, f.host.Update(ctx, got))
	waitPolicy(t, f, pol, ready(metav1.ConditionFalse, v1alpha1.ReasonInvalidSelector, "spec.clusterSelector: "))
	waitPolicy(t, f, pol, func(p *v1alpha1.FailoverPolicy) error {
		if len(p.Status.Members) != 0 {
			return errorf("an invalid selector selects %+v", p.Status.Members)
		}
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionMembersConnected)
		if c == nil || c.Reason != v1alpha1.ReasonInvalidSelector || !strings.HasPrefix(c.Message, "spec.clusterSelector: ") {
			return errorf("MembersConnected %+v", c)
		}
		return nil
	})
}

// TestOverlappingPolicies: of two node-recovery policies selecting the same
// member, the younger one says Overlapping=True naming the winner, and
// clears it when the winner goes.
func TestOverlappingPolicies(t *testing.T) {
	f := env(t)
	startManager(t, f, testOptions())
	f.join(t, "alpha", "alpha", nil)
	older := policy(t, f, "overlap-old", nil)
	waitPolicy(t, f, older, func(p *v1alpha1.FailoverPolicy) error {
		return wantConditionStatus(p, v1alpha1.ConditionOverlapping, metav1.ConditionFalse)
	})
	eventually(t, 5*time.Second, "a second of creation-time resolution between the policies", func() error {
		if time.Since(older.CreationTimestamp.Time) < time.Second {
			return errorf("too soon")
		}
		return nil
	})
	younger := policy(t, f, "overlap-young", nil)
	waitPolicy(t, f, younger, func(p *v1alpha1.FailoverPolicy) error {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionOverlapping)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonOverlapping || !strings.Contains(c.Message, "alpha: governed by overlap-old") {
			return errorf("Overlapping %+v, want True naming overlap-old", c)
		}
		return nil
	})
	waitPolicy(t, f, older, func(p *v1alpha1.FailoverPolicy) error {
		return wantConditionStatus(p, v1alpha1.ConditionOverlapping, metav1.ConditionFalse)
	})
	must(t, f.host.Delete(context.Background(), older))
	waitPolicy(t, f, younger, func(p *v1alpha1.FailoverPolicy) error {
		return wantConditionStatus(p, v1alpha1.ConditionOverlapping, metav1.ConditionFalse)
	})
}

func wantConditionStatus(p *v1alpha1.FailoverPolicy, typ string, status metav1.ConditionStatus) error {
	if c := meta.FindStatusCondition(p.Status.Conditions, typ); c == nil || c.Status != status {
		return errorf("%s %+v, want %s", typ, c, status)
	}
	return nil
}
