// Package cli gathers what `kubectl failover` shows from the host cluster
// only (FailoverPolicy status, KubeFedClusters, ReplicaSchedulingPreferences,
// Cluster API Machines) and renders it as kubectl-style tables, JSON or
// YAML. Building a view is pure (objects and a time in, rows out), so every
// table is golden-tested from typed objects.
package cli
