// Package rbaccheck records the requests controllers under test make to
// their (fake) member clients, as the permissions a member's authorizer
// would check, and compares them with internal/memberrbac: every request
// must be one fedfailover's member role allows, and every permission the
// role grants a part of fedfailover must be one its tests saw it use.
package rbaccheck

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/fedfailover/fedfailover/internal/memberrbac"
)

// Recorder collects permissions; its zero value is ready.
type Recorder struct {
	mu   sync.Mutex
	seen map[memberrbac.Permission]string // permission -> one call that needed it
}

func (r *Recorder) add(p memberrbac.Permission, call string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[memberrbac.Permission]string{}
	}
	if _, ok := r.seen[p]; !ok {
		r.seen[p] = call
	}
}

// Seen returns the permissions recorded so far.
func (r *Recorder) Seen() []memberrbac.Permission {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]memberrbac.Permission, 0, len(r.seen))
	for p := range r.seen {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b memberrbac.Permission) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// Client wraps a member client: every call is recorded before it is made.
func (r *Recorder) Client(c client.Client) client.Client {
	return &recording{Client: c, r: r, s: c.Scheme()}
}

// permission is what a call on obj needs; a call whose kind cannot be
// resolved is recorded as such, and fails Check.
func permission(s *runtime.Scheme, verb string, obj runtime.Object, namespace string) memberrbac.Permission {
	gvk, err := apiutil.GVKForObject(obj, s)
	if err != nil {
		return memberrbac.Permission{Verb: verb, Resource: "<unknown kind: " + err.Error() + ">"}
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	res, _ := meta.UnsafeGuessKindToResource(gvk)
	if _, isList := obj.(client.ObjectList); isList && verb == "get" {
		verb = "list"
	}
	return memberrbac.Permission{Verb: verb, Group: res.Group, Resource: res.Resource, Namespace: namespace}
}

func listNamespace(opts []client.ListOption) string {
	lo := &client.ListOptions{}
	lo.ApplyOptions(opts)
	return lo.Namespace
}

type recording struct {
	client.Client
	r *Recorder
	s *runtime.Scheme
}

func (c *recording) record(verb string, obj runtime.Object, ns string) {
	p := permission(c.s, verb, obj, ns)
	c.r.add(p, verb+" "+schemaKind(c.s, obj))
}

func (c *recording) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.record("get", obj, key.Namespace)
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *recording) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.record("list", list, listNamespace(opts))
	return c.Client.List(ctx, list, opts...)
}

func (c *recording) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.record("create", obj, obj.GetNamespace())
	return c.Client.Create(ctx, obj, opts...)
}

func (c *recording) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.record("update", obj, obj.GetNamespace())
	return c.Client.Update(ctx, obj, opts...)
}

func (c *recording) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.record("patch", obj, obj.GetNamespace())
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *recording) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.record("delete", obj, obj.GetNamespace())
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *recording) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	do := &client.DeleteAllOfOptions{}
	do.ApplyOptions(opts)
	c.record("deletecollection", obj, do.Namespace)
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

// SubResource records "<verb> <resource>/<sub>" for each call.
func (c *recording) SubResource(sub string) client.SubResourceClient {
	return &recordingSub{SubResourceClient: c.Client.SubResource(sub), c: c, sub: sub}
}

type recordingSub struct {
	client.SubResourceClient
	c   *recording
	sub string
}

func (s *recordingSub) record(verb string, obj client.Object) {
	p := permission(s.c.s, verb, obj, obj.GetNamespace())
	p.Resource += "/" + s.sub
	s.c.r.add(p, verb+" "+schemaKind(s.c.s, obj)+"/"+s.sub)
}

func (s *recordingSub) Get(ctx context.Context, obj, subResource client.Object, opts ...client.SubResourceGetOption) error {
	s.record("get", obj)
	return s.SubResourceClient.Get(ctx, obj, subResource, opts...)
}

func (s *recordingSub) Create(ctx context.Context, obj, subResource client.Object, opts ...client.SubResourceCreateOption) error {
	s.record("create", obj)
	return s.SubResourceClient.Create(ctx, obj, subResource, opts...)
}

func (s *recordingSub) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.record("update", obj)
	return s.SubResourceClient.Update(ctx, obj, opts...)
}

func (s *recordingSub) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.record("patch", obj)
	return s.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

func schemaKind(s *runtime.Scheme, obj runtime.Object) string {
	gvk, err := apiutil.GVKForObject(obj, s)
	if err != nil {
		return "?"
	}
	return schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}.String()
}

// Problems lists each recorded permission fedfailover's member role does
// not grant and, when the whole package ran (no -run or -skip filter),
// each permission the role grants by (memberrbac.ByNodeRecovery, ...) that
// no test used (not with -short either). Call it from TestMain after m.Run.
func (r *Recorder) Problems(by string) []string {
	seen := r.Seen()
	if len(seen) == 0 {
		return []string{"no request to a member was recorded: are the member clients wrapped?"}
	}
	var out []string
	for _, p := range seen {
		if !memberrbac.Covered(p) {
			r.mu.Lock()
			call := r.seen[p]
			r.mu.Unlock()
			out = append(out, fmt.Sprintf("a %s call needs %q, which fedfailover's member role (internal/memberrbac) does not grant", call, p))
		}
	}
	for _, name := range []string{"test.run", "test.skip"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return out // a subset of the tests: not every path ran
		}
	}
	if testing.Short() {
		return out
	}
	for _, n := range memberrbac.NeedsOf(by) {
		for _, want := range n.Permissions() {
			if !slices.ContainsFunc(seen, func(p memberrbac.Permission) bool { return p.Verb == want.Verb && n.Covers(p) }) {
				out = append(out, fmt.Sprintf("internal/memberrbac grants %q to %s (%s), but no test of %s used it: is it still needed?",
					want, by, n.Why, by))
			}
		}
	}
	return out
}

// Main runs the tests, then fails them for the Problems of by.
func Main(m *testing.M, r *Recorder, by string) int { return After(m.Run(), r, by) }

// After fails a test run that exited with code for the Problems of by.
func After(code int, r *Recorder, by string) int {
	if code != 0 {
		return code
	}
	for _, p := range r.Problems(by) {
		fmt.Fprintln(os.Stderr, "FAIL:", p)
		code = 1
	}
	return code
}
