package lab

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FederatedDeploymentYAML is a namespace, its FederatedNamespace, a
// FederatedDeployment placed on members and a ReplicaSchedulingPreference
// spreading total replicas over them with equal weights. Member Deployments
// start at 0 replicas: kubefed's RSP controller sets them.
func FederatedDeploymentYAML(ns, name string, total int, members []string) string {
	var placement, weights []string
	for _, m := range members {
		placement = append(placement, "{name: "+m+"}")
		weights = append(weights, fmt.Sprintf("    %s: {weight: 1}", m))
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: types.kubefed.io/v1beta1
kind: FederatedNamespace
metadata:
  name: %[1]s
  namespace: %[1]s
spec:
  placement:
    clusters: [%[5]s]
---
apiVersion: types.kubefed.io/v1beta1
kind: FederatedDeployment
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  placement:
    clusters: [%[5]s]
  template:
    spec:
      replicas: 0
      selector:
        matchLabels: {app: %[2]s}
      template:
        metadata:
          labels: {app: %[2]s}
        spec:
          containers:
          - name: app
            image: %[4]s
            resources:
              requests: {cpu: 100m}
---
apiVersion: scheduling.kubefed.io/v1alpha1
kind: ReplicaSchedulingPreference
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  targetKind: FederatedDeployment
  totalReplicas: %[3]d
  rebalance: true
  clusters:
%[6]s
`, ns, name, total, PauseImage, strings.Join(placement, ", "), strings.Join(weights, "\n"))
}

// CreateFederatedDeployment applies FederatedDeploymentYAML to the host for
// every member of the lab.
func (l *Lab) CreateFederatedDeployment(ctx context.Context, ns, name string, total int) error {
	return l.ApplyYAML(ctx, HostName, FederatedDeploymentYAML(ns, name, total, l.Members()))
}

// DeploymentReplicas is a member Deployment's wanted and ready replicas.
func (l *Lab) DeploymentReplicas(ctx context.Context, cluster, ns, name string) (spec, ready int32, err error) {
	cl, err := l.Client(cluster)
	if err != nil {
		return 0, 0, err
	}
	d := &appsv1.Deployment{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		return 0, 0, err
	}
	if d.Spec.Replicas != nil {
		spec = *d.Spec.Replicas
	}
	return spec, d.Status.ReadyReplicas, nil
}
