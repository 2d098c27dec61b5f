package policystatus

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// Apply server-side applies status to the named FailoverPolicy as owner.
// Only the fields set in status are claimed, so controllers with other
// field managers keep theirs. A policy deleted meanwhile is not an error.
func Apply(ctx context.Context, c client.Client, name, owner string, status *v1alpha1.FailoverPolicyStatus) error {
	_, err := apply(ctx, c, name, owner, status)
	return err
}

// apply is Apply, returning the policy's resourceVersion after the write
// ("" when the policy is gone).
func apply(ctx context.Context, c client.Client, name, owner string, status *v1alpha1.FailoverPolicyStatus) (string, error) {
	st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		return "", fmt.Errorf("converting status: %w", err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": st}}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("FailoverPolicy"))
	u.SetName(name)
	if err := c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(owner), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("applying FailoverPolicy status: %w", err)
	}
	return u.GetResourceVersion(), nil // the response, decoded into u
}

// Applier applies one field owner's status fields, and does not send again
// a status it already applied to the policy as it is now: a pass without
// news (a resync) then makes no request. Even a server-side apply that
// changes nothing is a write request, one a minute per policy and writer,
// which a federation at rest should not pay. "As it is now" is the
// policy's resourceVersion, or, after a write to the policy since ours,
// the policy's status still holding every field of ours as we applied it
// (holds): another writer's apply then costs no echo from each of the
// others, while a write that changed or wiped one of our fields makes the
// next pass apply again. Its zero value is ready.
type Applier struct {
	mu   sync.Mutex
	last map[string]applied // by policy name
}

// applied is what an Applier last sent to a policy, and the policy's
// resourceVersion right after.
type applied struct {
	resourceVersion string
	status          []byte
}

// Apply is Apply for pol as read (its resourceVersion tells whether
// anything wrote to it since this Applier did). It reports whether it sent
// the request.
func (a *Applier) Apply(ctx context.Context, c client.Client, pol *v1alpha1.FailoverPolicy, owner string, status *v1alpha1.FailoverPolicyStatus) (bool, error) {
	b, err := fingerprint(status, pol)
	if err != nil {
		return false, err
	}
	a.mu.Lock()
	prev, ok := a.last[pol.Name]
	a.mu.Unlock()
	if ok && bytes.Equal(prev.status, b) && (prev.resourceVersion == pol.ResourceVersion || holds(&pol.Status, b)) {
		return false, nil
	}
	// Once applied, the policy holds our recentDecisions: the next pass
	// leaves them out of its fingerprint unless it adds one.
	sentFingerprint, err := fingerprint(status, &v1alpha1.FailoverPolicy{Status: v1alpha1.FailoverPolicyStatus{RecentDecisions: status.RecentDecisions}})
	if err != nil {
		return false, err
	}
	rv, err := apply(ctx, c, pol.Name, owner, status)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil || rv == "" {
		delete(a.last, pol.Name)
		return true, err
	}
	if a.last == nil {
		a.last = map[string]applied{}
	}
	a.last[pol.Name] = applied{resourceVersion: rv, status: sentFingerprint}
	return true, nil
}

// fingerprint is what tells a status apart from the last one applied: the
// status, without its recentDecisions when the policy holds them already.
// The log is one atomic list every writer merges its own decisions into,
// so a writer with no decision of its own to add would otherwise echo
// each decision another writer recorded.
func fingerprint(status *v1alpha1.FailoverPolicyStatus, pol *v1alpha1.FailoverPolicy) ([]byte, error) {
	mine, err := json.Marshal(status.RecentDecisions)
	if err != nil {
		return nil, fmt.Errorf("encoding status: %w", err)
	}
	recorded, err := json.Marshal(pol.Status.RecentDecisions)
	if err != nil {
		return nil, fmt.Errorf("encoding status: %w", err)
	}
	fp := *status
	if bytes.Equal(mine, recorded) {
		fp.RecentDecisions = nil
	}
	b, err := json.Marshal(&fp)
	if err != nil {
		return nil, fmt.Errorf("encoding status: %w", err)
	}
	return b, nil
}

// holds reports whether current carries every field of the status desired
// (JSON) with the same value. Conditions are matched by type: other writers
// own the other types. Any other field is compared whole; one that another
// writer shares only makes the next pass apply again.
func holds(current *v1alpha1.FailoverPolicyStatus, desired []byte) bool {
	var want, cur map[string]any
	b, err := json.Marshal(current)
	if err != nil || json.Unmarshal(desired, &want) != nil || json.Unmarshal(b, &cur) != nil {
		return false
	}
	for field, v := range want {
		if field == "conditions" {
			if !conditionsHold(cur[field], v) {
				return false
			}
			continue
		}
		if !equality.Semantic.DeepEqual(cur[field], v) {
			return false
		}
	}
	return true
}

// conditionsHold: every desired condition is among current's, equal.
func conditionsHold(current, desired any) bool {
	byType := map[any]any{}
	if list, ok := current.([]any); ok {
		for _, c := range list {
			if m, ok := c.(map[string]any); ok {
				byType[m["type"]] = m
			}
		}
	}
	want, ok := desired.([]any)
	if !ok {
		return false
	}
	for _, c := range want {
		m, ok := c.(map[string]any)
		if !ok || !equality.Semantic.DeepEqual(byType[m["type"]], c) {
			return false
		}
	}
	return true
}

// Forget drops what the Applier remembers of a policy (deleted).
func (a *Applier) Forget(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.last, name)
}
