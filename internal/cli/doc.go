// Package cli gathers what `kubectl failover` shows from the host cluster
// only (FailoverPolicy status, KubeFedClusters, ReplicaSchedulingPreferences,
// Cluster API Machines) and renders it as kubectl-style tables or, with
// -o, as a typed report (StatusReport, NodeExplanation, PlanReport) through
// k8s.io/cli-runtime's printers: JSON, YAML, name, JSONPath, Go templates.
// Building a view is pure (objects and a time in, rows out), so every
// table is golden-tested from typed objects.
package cli
