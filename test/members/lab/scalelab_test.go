//go:build e2e

package lab

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/test/lab"
)

// The scale lab's options on real control planes: one etcd shared by every
// API server under its own prefix, kube-controller-manager without the
// node-lifecycle controller, static bulk that stays Ready and unwritten,
// and the lab's node monitor marking a powered-off lab node unreachable as
// that controller would, and clearing it when the node is restored.
func TestScaleLabStaticBulkAndNodeMonitor(t *testing.T) {
	if err := lab.CheckBinaries(lab.DefaultBinDir()); err != nil {
		t.Fatalf("lab binaries missing (run `make tools`): %v", err)
	}
	ctx := context.Background()
	const grace = 16 * time.Second
	l, err := lab.Up(ctx, lab.Options{Dir: filepath.Join(t.TempDir(), "lab"), Members: 1, Nodes: 2, Logf: t.Logf,
		NoNodeLifecycle: true, SharedEtcd: true, NodeMonitorGracePeriod: grace})
	if err != nil {
		t.Fatalf("starting the lab: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Down(context.Background()); err != nil {
			t.Errorf("lab teardown: %v", err)
		}
	})
	st, err := l.State()
	if err != nil {
		t.Fatal(err)
	}
	etcds := 0
	for _, p := range st.Procs {
		args := strings.Join(p.Args, " ")
		switch p.Component {
		case lab.CompEtcd:
			etcds++
		case lab.CompKCM:
			if !strings.Contains(args, "-node-lifecycle-controller") {
				t.Errorf("%s runs the node-lifecycle controller: %s", p.Key(), args)
			}
		case lab.CompAPIServer:
			if !strings.Contains(args, "--etcd-prefix=/lab-"+p.Cluster) {
				t.Errorf("%s has no prefix of its own: %s", p.Key(), args)
			}
		}
	}
	if etcds != 1 {
		t.Errorf("%d etcd processes, want 1 shared", etcds)
	}

	member := l.Members()[0]
	mc, hc := l.MustClient(member), l.MustClient(lab.HostName)
	// Objects of one API server are not seen by another.
	if err := mc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-in-member"}}); err != nil {
		t.Fatal(err)
	}
	if err := hc.Get(ctx, client.ObjectKey{Name: "only-in-member"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("the host sees the member's namespace: %v", err)
	}

	statics, err := l.AddStaticNodes(ctx, member, 20, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.CreateStaticPods(ctx, member, "bench", statics, 2, 0); err != nil {
		t.Fatal(err)
	}
	rv := func() map[string]string {
		out := map[string]string{}
		for _, name := range statics {
			n := &corev1.Node{}
			if err := mc.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
				t.Fatal(err)
			}
			if lab.NodeReadyStatus(n) != corev1.ConditionTrue {
				t.Errorf("static node %s is %s", name, lab.NodeReadyStatus(n))
			}
			out[name] = n.ResourceVersion
		}
		return out
	}
	before := rv()

	node := lab.NodeName(member, 1)
	off := time.Now()
	if err := l.PowerOff(ctx, node, lab.EvidenceNone); err != nil {
		t.Fatal(err)
	}
	poll(t, grace+30*time.Second, node+" Unknown with the unreachable taints", func() error {
		n := &corev1.Node{}
		if err := mc.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		taints := 0
		for _, tt := range n.Spec.Taints {
			if tt.Key == lab.UnreachableTaint {
				taints++
			}
		}
		if lab.NodeReadyStatus(n) != corev1.ConditionUnknown || taints != 2 {
			return fmt.Errorf("Ready %s, %d unreachable taints", lab.NodeReadyStatus(n), taints)
		}
		return nil
	})
	if took := time.Since(off); took < grace {
		t.Errorf("%s marked %s after power-off, before the grace period %s", node, took, grace)
	}
	// The static nodes went through the same grace period untouched.
	after := rv()
	for name, v := range before {
		if after[name] != v {
			t.Errorf("static node %s was written (resourceVersion %s -> %s)", name, v, after[name])
		}
	}
	var pods corev1.PodList
	if err := mc.List(ctx, &pods, client.InNamespace("bench")); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			t.Errorf("static pod %s is %s", p.Name, p.Status.Phase)
		}
	}

	if err := l.Restore(ctx, node); err != nil {
		t.Fatal(err)
	}
	poll(t, 60*time.Second, node+" Ready without the unreachable taints", func() error {
		n := &corev1.Node{}
		if err := mc.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		for _, tt := range n.Spec.Taints {
			if tt.Key == lab.UnreachableTaint {
				return fmt.Errorf("still tainted %s:%s", tt.Key, tt.Effect)
			}
		}
		if lab.NodeReadyStatus(n) != corev1.ConditionTrue {
			return fmt.Errorf("Ready %s", lab.NodeReadyStatus(n))
		}
		return nil
	})
}
