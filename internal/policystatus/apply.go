package policystatus

import (
	"context"
	"fmt"

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
	st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		return fmt.Errorf("converting status: %w", err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": st}}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("FailoverPolicy"))
	u.SetName(name)
	if err := c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(owner), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("applying FailoverPolicy status: %w", err)
	}
	return nil
}
