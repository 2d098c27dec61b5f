package member

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/fedfailover/fedfailover/internal/memberrbac"
	"github.com/fedfailover/fedfailover/internal/scheme"
)

const forbiddenPatch = `{"kind":"Status","apiVersion":"v1","status":"Failure",` +
	`"message":"nodes \"n1\" is forbidden: User \"system:serviceaccount:ff:ff\" cannot patch resource \"nodes\" in API group \"\" at the cluster scope",` +
	`"reason":"Forbidden","details":{"name":"n1","kind":"nodes"},"code":403}`

// TestPermissionTransport: a 403 records the refused permission with the
// API server's message and leaves the body for client-go to read; a 2xx
// for the same permission forgets it; other answers change nothing.
func TestPermissionTransport(t *testing.T) {
	var changes atomic.Int32
	d := newDenials(time.Now, func() { changes.Add(1) })
	status := http.StatusForbidden
	rt := permissionTransport{denials: d, rt: roundTrip(func(r *http.Request) (*http.Response, error) {
		rec := httptest.NewRecorder()
		rec.WriteHeader(status)
		if status == http.StatusForbidden {
			_, _ = rec.WriteString(forbiddenPatch)
		}
		return rec.Result(), nil
	})}
	do := func(method, url string) string {
		t.Helper()
		req := httptest.NewRequest(method, url, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if body := do("PATCH", "https://m/api/v1/nodes/n1"); body != forbiddenPatch {
		t.Fatalf("client-go would read %q", body)
	}
	do("PATCH", "https://m/api/v1/nodes/n2")
	ds := d.list()
	if len(ds) != 1 || ds[0].perm != (memberrbac.Permission{Verb: "patch", Resource: "nodes"}) || !ds[0].authz ||
		!strings.Contains(ds[0].message, `cannot patch resource "nodes"`) || changes.Load() != 1 {
		t.Fatalf("after two refused patches: %+v, %d changes", ds, changes.Load())
	}
	msg := deniedMessage(ds)
	for _, want := range []string{"the member refused: patch nodes (", `User "system:serviceaccount:ff:ff" cannot patch`, "kubectl failover member-rbac"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	status = http.StatusNotFound
	do("PATCH", "https://m/api/v1/nodes/n1")
	status = http.StatusOK
	do("GET", "https://m/api/v1/nodes/n1") // another permission
	if len(d.list()) != 1 {
		t.Fatal("a 404, or a success of another verb, forgot the refusal")
	}
	do("PATCH", "https://m/api/v1/nodes/n1")
	if len(d.list()) != 0 || changes.Load() != 2 {
		t.Fatalf("a successful patch did not forget the refusal: %+v", d.list())
	}
}

func TestDeniedMessage(t *testing.T) {
	d := newDenials(time.Now, nil)
	d.refused(memberrbac.Permission{Verb: "create", Group: "policy", Resource: "pods/eviction", Namespace: "shop"}, "")
	d.refused(memberrbac.Permission{Verb: "create", Resource: "events", Namespace: "default"},
		`events is forbidden: exceeded quota: compute, requested: count/events=1`)
	ds := d.list()
	msg := deniedMessage(ds)
	if !strings.HasPrefix(msg, "the member refused: create events in namespace default (events is forbidden: exceeded quota") ||
		!strings.Contains(msg, "create pods.policy/eviction in namespace shop (not in fedfailover's member role") {
		t.Errorf("message %q", msg)
	}
	if ds[0].authz || !ds[1].authz {
		t.Errorf("an admission refusal is not the authorizer's, one without a message is: %+v", ds)
	}
	if deniedKey(ds) != "create events in namespace default,create pods.policy/eviction in namespace shop" {
		t.Errorf("key %q", deniedKey(ds))
	}
	for i := range 10 {
		d.refused(memberrbac.Permission{Verb: "get", Resource: "r" + string(rune('a'+i))}, "")
	}
	if msg := deniedMessage(d.list()); !strings.Contains(msg, "and 7 more") {
		t.Errorf("a long list is not cut: %q", msg)
	}
}

// TestReviewForgetsWhatIsGrantedNow: an access review that allows a
// refused permission forgets it; one that does not, or fails, keeps it;
// admission refusals are not reviewed; reviews wait permissionRecheck.
func TestReviewForgetsWhatIsGrantedNow(t *testing.T) {
	now := time.Unix(1000, 0)
	d := newDenials(func() time.Time { return now }, nil)
	patch := memberrbac.Permission{Verb: "patch", Resource: "nodes"}
	del := memberrbac.Permission{Verb: "delete", Resource: "pods", Namespace: "shop"}
	quota := memberrbac.Permission{Verb: "create", Resource: "events", Namespace: "default"}
	d.refused(patch, `User "x" cannot patch resource "nodes"`)
	d.refused(del, `User "x" cannot delete resource "pods"`)
	d.refused(quota, "exceeded quota")
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	var reviewed []string
	c := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			r := obj.(*authorizationv1.SelfSubjectAccessReview)
			reviewed = append(reviewed, r.Spec.ResourceAttributes.Verb+" "+r.Spec.ResourceAttributes.Resource)
			r.Status.Allowed = r.Spec.ResourceAttributes.Verb == "patch"
			return nil
		},
	}).Build()
	perms := d.dueForReview()
	if len(perms) != 2 {
		t.Fatalf("due %v, want the two authorization refusals", perms)
	}
	d.review(t.Context(), c, perms)
	if got := deniedKey(d.list()); got != "create events in namespace default,delete pods in namespace shop" || len(reviewed) != 2 {
		t.Fatalf("after the review: %q (reviewed %v)", got, reviewed)
	}
	if d.dueForReview() != nil {
		t.Fatal("reviewed again at once")
	}
	now = now.Add(permissionRecheck)
	if len(d.dueForReview()) != 1 {
		t.Fatal("not reviewed again after permissionRecheck")
	}
}
