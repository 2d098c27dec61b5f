package fenceagent

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/internal/remediation"
	"github.com/fedfailover/fedfailover/test/paths"
	"github.com/fedfailover/fedfailover/test/poll"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// TestAgent: through a real API server with the lab's CRDs, a remediation
// stamped from a template as fedfailover stamps it is acted on after its
// delay: PowerOff powers the named node off, then reports Succeeded=True;
// Fail reports Succeeded=False and powers nothing off.
func TestAgent(t *testing.T) {
	dir, err := paths.FenceAgentCRDDir()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testenv.Start(t, dir)
	cl, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fence"}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var off []string
	a := New(cl, Options{Namespace: "fence", PowerOff: func(_ context.Context, cluster, node string) error {
		mu.Lock()
		defer mu.Unlock()
		off = append(off, cluster+"/"+node)
		return nil
	}, ForNode: func(_, node string) (time.Duration, string, bool) {
		return 300 * time.Millisecond, ModeFail, node == "node-3" // a campaign's per-node outcome
	}})
	for _, c := range []struct{ name, mode, node, want string }{
		{"power-off", ModePowerOff, "node-1", "True"},
		{"fail", ModeFail, "node-2", "False"},
		{"for-node", ModePowerOff, "node-3", "False"},
	} {
		tmpl := Template("fence", c.name, 300*time.Millisecond, c.mode)
		if err := cl.Create(ctx, tmpl); err != nil {
			t.Fatal(err)
		}
		owner := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "owner-uid"}
		u, err := remediation.Stamp(tmpl, "m1."+c.node, remediation.Target{Cluster: "m1", Node: c.node, NodeUID: "uid"}, owner)
		if err != nil {
			t.Fatal(err)
		}
		u.SetOwnerReferences(nil) // no such owner in this API server
		if err := cl.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		created := time.Now()
		poll.T(t, 10*time.Second, 50*time.Millisecond, c.name+": Succeeded="+c.want, poll.NoError(func() error {
			if err := a.Step(ctx); err != nil {
				return err
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(RemediationGVK)
			if err := cl.Get(ctx, client.ObjectKeyFromObject(u), got); err != nil {
				return err
			}
			o := remediation.Read(got, "")
			if string(o.Succeeded) != c.want {
				return fmt.Errorf("Succeeded=%q", o.Succeeded)
			}
			return nil
		}))
		if waited := time.Since(created); waited < 300*time.Millisecond {
			t.Errorf("%s: acted after %s, before the delay", c.name, waited)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(off) != 1 || off[0] != "m1/node-1" {
		t.Fatalf("powered off %v, want only m1/node-1", off)
	}
	if acts := a.Actions(); len(acts) != 3 || acts[0].Result != ReasonPoweredOff || acts[1].Result != ReasonAgentFailed || acts[2].Result != ReasonAgentFailed {
		t.Fatalf("actions %+v", acts)
	}
}
