package member

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/internal/memberrbac"
)

// A request the member refuses (403) must never fail silently: with
// fedfailover's least-privilege role (internal/memberrbac), a role that
// lacks a verb, or an admission policy of the member, a node recovery or a
// shift would otherwise stall with nothing but a log line. Every request
// of a connection, from its clients and its informers alike, passes
// permissionTransport, which records the permission each 403 refused.
// While any is recorded the member's reason is MemberPermissionDenied,
// naming them (status.members[], an event on the KubeFedCluster, the
// policy's MemberPermissionDenied condition and Ready).
//
// A refusal is forgotten when a request with the same permission succeeds,
// when a SelfSubjectAccessReview (every permissionRecheck, while any is
// recorded) says the member now grants it, and with the connection (new
// credentials, a reconnect).

// permissionRecheck is how often refused permissions are reviewed again.
const permissionRecheck = 10 * time.Second

// maxDenialsShown bounds the refusals a message names.
const maxDenialsShown = 5

// denial is one refused permission.
type denial struct {
	perm memberrbac.Permission
	// message is the member API server's (it names the identity and the
	// permission, never the token).
	message string
	// authz: refused by the member's authorizer (RBAC), not by an
	// admission policy or quota: only then can an access review clear it.
	authz bool
	first time.Time
}

// denials are the refusals of one connection.
type denials struct {
	now     func() time.Time
	changed func() // must not block: it is called from requests

	mu         sync.Mutex
	byPerm     map[memberrbac.Permission]denial
	reviewedAt time.Time
}

func newDenials(now func() time.Time, changed func()) *denials {
	return &denials{now: now, changed: changed, byPerm: map[memberrbac.Permission]denial{}}
}

// refused records a 403 for p.
func (d *denials) refused(p memberrbac.Permission, message string) {
	d.mu.Lock()
	_, known := d.byPerm[p]
	if !known {
		authz := message == "" || strings.Contains(message, `" cannot `)
		d.byPerm[p] = denial{perm: p, message: message, authz: authz, first: d.now()}
	}
	d.mu.Unlock()
	if !known && d.changed != nil {
		d.changed()
	}
}

// allowed forgets a refusal of p, if any.
func (d *denials) allowed(p memberrbac.Permission) {
	d.mu.Lock()
	_, known := d.byPerm[p]
	delete(d.byPerm, p)
	d.mu.Unlock()
	if known && d.changed != nil {
		d.changed()
	}
}

// list returns the refusals, in the order of their permissions.
func (d *denials) list() []denial {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]denial, 0, len(d.byPerm))
	for _, x := range d.byPerm {
		out = append(out, x)
	}
	slices.SortFunc(out, func(a, b denial) int { return strings.Compare(a.perm.String(), b.perm.String()) })
	return out
}

// dueForReview returns the authorization refusals to review again, at most
// once per permissionRecheck; none when nothing is due.
func (d *denials) dueForReview() []memberrbac.Permission {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	if len(d.byPerm) == 0 || now.Sub(d.reviewedAt) < permissionRecheck {
		return nil
	}
	d.reviewedAt = now
	var out []memberrbac.Permission
	for p, x := range d.byPerm {
		if x.authz {
			out = append(out, p)
		}
	}
	return out
}

// review asks the member whether it grants each permission now and
// forgets those it does. An unanswered review keeps the refusal.
func (d *denials) review(ctx context.Context, c client.Client, perms []memberrbac.Permission) {
	for _, p := range perms {
		r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{}}
		if p.Resource == "" {
			r.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Verb: p.Verb, Path: p.Path}
		} else {
			res, sub, _ := strings.Cut(p.Resource, "/")
			r.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Verb: p.Verb, Group: p.Group,
				Resource: res, Subresource: sub, Namespace: p.Namespace}
		}
		if err := c.Create(ctx, r); err != nil {
			return
		}
		if r.Status.Allowed {
			d.allowed(p)
		}
	}
}

// key identifies the set of refusals, for transitions.
func deniedKey(ds []denial) string {
	parts := make([]string, len(ds))
	for i, x := range ds {
		parts[i] = x.perm.String()
	}
	return strings.Join(parts, ",")
}

// deniedMessage names the refused permissions, each with the member API
// server's own words, and says what to do.
func deniedMessage(ds []denial) string {
	parts := make([]string, 0, min(len(ds), maxDenialsShown)+1)
	for i, x := range ds {
		if i == maxDenialsShown {
			parts = append(parts, fmt.Sprintf("and %d more", len(ds)-maxDenialsShown))
			break
		}
		s := x.perm.String()
		if !memberrbac.Covered(x.perm) {
			s += " (not in fedfailover's member role: a request it should not make)"
		}
		if x.message != "" {
			s += " (" + truncate(x.message, 300) + ")"
		}
		parts = append(parts, s)
	}
	return "the member refused: " + strings.Join(parts, "; ") +
		"; grant what `kubectl failover member-rbac` grants to the identity of the member's credentials"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// permissionTransport records the permissions the member refuses (403)
// and forgets those it then allows (2xx).
type permissionTransport struct {
	rt      http.RoundTripper
	denials *denials
}

func (t permissionTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	switch {
	case resp.StatusCode == http.StatusForbidden:
		p := memberrbac.RequestPermission(req.Method, req.URL)
		msg := ""
		resp.Body, msg = statusMessage(resp.Body)
		t.denials.refused(p, msg)
	case resp.StatusCode >= 200 && resp.StatusCode <= 299:
		t.denials.allowed(memberrbac.RequestPermission(req.Method, req.URL))
	}
	return resp, nil
}

// WrappedRoundTripper lets utilnet.CloseIdleConnectionsFor reach the
// transport underneath.
func (t permissionTransport) WrappedRoundTripper() http.RoundTripper { return t.rt }

// statusMessage reads the message of a Status response body and returns a
// body that reads the same bytes again for client-go.
func statusMessage(body io.ReadCloser) (io.ReadCloser, string) {
	if body == nil {
		return body, ""
	}
	data, err := io.ReadAll(io.LimitReader(body, 1<<16))
	_ = body.Close()
	out := io.NopCloser(bytes.NewReader(data))
	if err != nil {
		return out, ""
	}
	// JSON or protobuf, as the request asked.
	obj, err := runtime.Decode(clientgoscheme.Codecs.UniversalDeserializer(), data)
	if st, ok := obj.(*metav1.Status); ok && err == nil {
		return out, st.Message
	}
	return out, ""
}
