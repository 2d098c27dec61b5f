package lab

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/test/paths"
)

// Labels the lab puts on Machines, besides cluster.x-k8s.io/cluster-name.
const (
	MachineNodeLabel = "lab.fedfailover.io/node"
	kwokMachineKind  = "KwokMachine"
	labInfraGroup    = "infrastructure.cluster.x-k8s.io"
	labK8sVersion    = "v1.37.2"
)

// Evidence is what a powered-off node leaves behind in Cluster API.
type Evidence string

// Evidence behaviours for PowerOff.
const (
	// EvidenceMachineDeleted: the Machine is being deleted and its
	// infrastructure is gone, as when CAPI deletes a machine.
	EvidenceMachineDeleted Evidence = "machine-deleted"
	// EvidencePoweredOffCondition: a Machine condition (default type PowerOn,
	// status False, reason PoweredOff) as a provider reporting power state.
	EvidencePoweredOffCondition Evidence = "powered-off-condition"
	// EvidenceNone: nothing; the node just stops.
	EvidenceNone Evidence = "none"
)

// ParseEvidence validates an evidence name.
func ParseEvidence(s string) (Evidence, error) {
	switch e := Evidence(s); e {
	case EvidenceMachineDeleted, EvidencePoweredOffCondition, EvidenceNone:
		return e, nil
	}
	return "", fmt.Errorf("unknown evidence %q (want %s, %s or %s)", s, EvidenceMachineDeleted, EvidencePoweredOffCondition, EvidenceNone)
}

func cond(t string, s metav1.ConditionStatus, reason, msg string, gen int64) metav1.Condition {
	// message is required by the v1beta2 CRD schema even when empty.
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: metav1.Now()}
}

// machineClient is the client of the cluster that holds the Clusters and
// Machines: the management cluster when the lab has one, else the host.
func (l *Lab) machineClient() (client.Client, error) {
	st, err := l.State()
	if err != nil {
		return nil, err
	}
	if st.Management != nil {
		return l.Client(st.Management.Name)
	}
	return l.Client(HostName)
}

// MachineCluster names the cluster that holds the Clusters and Machines.
func (l *Lab) MachineCluster() string {
	if st, err := l.State(); err == nil && st.Management != nil {
		return st.Management.Name
	}
	return HostName
}

// ManagementSecret is the host Secret (kubefed namespace, key kubeconfig)
// with the management cluster's kubeconfig, named by every member's
// KubeFedCluster when the lab has a management cluster.
const ManagementSecret = "lab-capi-management"

// setupManagement installs the Cluster API CRDs in the management cluster
// and creates its Machine namespace (nothing without one).
func (l *Lab) setupManagement(ctx context.Context, st *State) error {
	if st.Management == nil {
		return nil
	}
	cl, err := l.Client(st.Management.Name)
	if err != nil {
		return err
	}
	files, err := paths.HostCRDFiles()
	if err != nil {
		return err
	}
	if err := installCRDs(ctx, cl, files...); err != nil {
		return fmt.Errorf("management cluster CRDs: %w", err)
	}
	if l.opts.MachineNamespace != "default" {
		if err := createIgnoreExists(ctx, cl, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: l.opts.MachineNamespace}}); err != nil {
			return err
		}
	}
	return nil
}

// pointMembersAtManagement stores the management cluster's kubeconfig in
// the host (ManagementSecret) and names it on every member's KubeFedCluster.
// The lab's admin kubeconfig embeds its certificates, as fedfailover
// requires of a kubeconfig in a Secret.
func (l *Lab) pointMembersAtManagement(ctx context.Context, st *State) error {
	if st.Management == nil {
		return nil
	}
	cfg, err := clusterKubeconfig(st.Management)
	if err != nil {
		return err
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	host, err := l.Client(HostName)
	if err != nil {
		return err
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: KubefedNS, Name: ManagementSecret}, Data: map[string][]byte{"kubeconfig": data}}
	if err := createIgnoreExists(ctx, host, s); err != nil {
		return fmt.Errorf("management kubeconfig Secret: %w", err)
	}
	for _, c := range st.Clusters[1:] {
		kfc := &unstructured.Unstructured{}
		kfc.SetAPIVersion("core.kubefed.io/v1beta1")
		kfc.SetKind("KubeFedCluster")
		kfc.SetNamespace(KubefedNS)
		kfc.SetName(c.Name)
		patch := []byte(`{"metadata":{"annotations":{"failover.fedfailover.io/capi-management-cluster":"` + ManagementSecret + `"}}}`)
		if err := host.Patch(ctx, kfc, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("annotating KubeFedCluster %s: %w", c.Name, err)
		}
	}
	l.logf("lab: members' Machines are in management cluster %s", st.Management.Name)
	return nil
}

// createMachines creates one CAPI Cluster per member and one Machine per
// node, with the status a provider and CAPI would have written.
func (l *Lab) createMachines(ctx context.Context, st *State) error {
	host, err := l.machineClient()
	if err != nil {
		return err
	}
	for _, c := range st.Clusters[1:] {
		if err := l.createCAPICluster(ctx, host, c); err != nil {
			return err
		}
		for _, n := range c.Nodes {
			if err := l.createMachine(ctx, host, c.Name, n); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *Lab) createCAPICluster(ctx context.Context, host client.Client, c *ClusterState) error {
	cl := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: l.opts.MachineNamespace},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: int32(c.APIPort)},
		},
	}
	if err := createIgnoreExists(ctx, host, cl); err != nil {
		return fmt.Errorf("CAPI Cluster %s: %w", c.Name, err)
	}
	yes := true
	cl.Status.Initialization.InfrastructureProvisioned = &yes
	cl.Status.Initialization.ControlPlaneInitialized = &yes
	cl.Status.Phase = string(clusterv1.ClusterPhaseProvisioned)
	for _, cd := range []metav1.Condition{
		cond(clusterv1.ClusterInfrastructureReadyCondition, metav1.ConditionTrue, clusterv1.ClusterInfrastructureReadyReason, "", cl.Generation),
		cond(clusterv1.ClusterControlPlaneInitializedCondition, metav1.ConditionTrue, "Initialized", "", cl.Generation),
		cond(clusterv1.ClusterControlPlaneAvailableCondition, metav1.ConditionTrue, clusterv1.ClusterControlPlaneAvailableReason, "", cl.Generation),
		cond(clusterv1.ClusterAvailableCondition, metav1.ConditionTrue, clusterv1.ClusterAvailableReason, "", cl.Generation),
		cond(clusterv1.PausedCondition, metav1.ConditionFalse, clusterv1.NotPausedReason, "", cl.Generation),
	} {
		meta.SetStatusCondition(&cl.Status.Conditions, cd)
	}
	cl.Status.ObservedGeneration = cl.Generation
	return host.Status().Update(ctx, cl)
}

func (l *Lab) machineObject(cluster string, n NodeState) *clusterv1.Machine {
	secret := "lab-bootstrap-" + n.Name
	return &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.Name, Namespace: l.opts.MachineNamespace,
			Labels:     map[string]string{clusterv1.ClusterNameLabel: cluster, MachineNodeLabel: n.Name},
			Finalizers: []string{clusterv1.MachineFinalizer},
		},
		Spec: clusterv1.MachineSpec{
			ClusterName:       cluster,
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: &secret},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: labInfraGroup, Kind: kwokMachineKind, Name: n.Name},
			Version:           labK8sVersion,
			ProviderID:        ProviderIDPrefix + n.Name,
			FailureDomain:     n.Zone,
		},
	}
}

func (l *Lab) createMachine(ctx context.Context, host client.Client, cluster string, n NodeState) error {
	m := l.machineObject(cluster, n)
	if err := host.Create(ctx, m); err != nil {
		return fmt.Errorf("Machine %s: %w", n.Name, err)
	}
	// Through the retrying status update: the lab's machine sync may patch
	// the new Machine's status between its create and this write.
	return l.updateMachineStatus(ctx, n.Name, func(m *clusterv1.Machine) {
		yes := true
		m.Status.Initialization.InfrastructureProvisioned = &yes
		m.Status.Initialization.BootstrapDataSecretCreated = &yes
		m.Status.NodeRef = clusterv1.MachineNodeReference{Name: n.Name}
		m.Status.Phase = string(clusterv1.MachinePhaseRunning)
		m.Status.FailureDomain = n.Zone
		m.Status.Addresses = clusterv1.MachineAddresses{{Type: clusterv1.MachineHostName, Address: n.Name}}
		g := m.Generation
		for _, cd := range []metav1.Condition{
			cond(clusterv1.MachineBootstrapConfigReadyCondition, metav1.ConditionTrue, clusterv1.MachineBootstrapDataSecretProvidedReason, "", g),
			cond(clusterv1.MachineInfrastructureReadyCondition, metav1.ConditionTrue, clusterv1.MachineInfrastructureReadyReason, "", g),
			cond(clusterv1.MachineNodeReadyCondition, metav1.ConditionTrue, clusterv1.MachineNodeReadyReason, "", g),
			cond(clusterv1.MachineNodeHealthyCondition, metav1.ConditionTrue, clusterv1.MachineNodeHealthyReason, "", g),
			cond(clusterv1.MachineReadyCondition, metav1.ConditionTrue, clusterv1.MachineReadyReason, "", g),
			cond(clusterv1.MachineAvailableCondition, metav1.ConditionTrue, clusterv1.MachineAvailableReason, "", g),
			cond(clusterv1.MachineUpToDateCondition, metav1.ConditionTrue, clusterv1.MachineUpToDateReason, "", g),
			cond(clusterv1.MachineDeletingCondition, metav1.ConditionFalse, clusterv1.MachineNotDeletingReason, "", g),
			cond(clusterv1.PausedCondition, metav1.ConditionFalse, clusterv1.NotPausedReason, "", g),
		} {
			meta.SetStatusCondition(&m.Status.Conditions, cd)
		}
		m.Status.ObservedGeneration = g
	})
}

// Machine returns the Machine of node.
func (l *Lab) Machine(ctx context.Context, node string) (*clusterv1.Machine, error) {
	host, err := l.machineClient()
	if err != nil {
		return nil, err
	}
	m := &clusterv1.Machine{}
	if err := host.Get(ctx, client.ObjectKey{Namespace: l.opts.MachineNamespace, Name: node}, m); err != nil {
		return nil, err
	}
	return m, nil
}

// updateMachineStatus re-reads the Machine and applies mutate to its status.
func (l *Lab) updateMachineStatus(ctx context.Context, node string, mutate func(*clusterv1.Machine)) error {
	host, err := l.machineClient()
	if err != nil {
		return err
	}
	return pollUntil(ctx, 10*time.Second, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		m := &clusterv1.Machine{}
		if err := host.Get(ctx, client.ObjectKey{Namespace: l.opts.MachineNamespace, Name: node}, m); err != nil {
			return false, err
		}
		mutate(m)
		m.Status.LastUpdated = metav1.Now()
		if err := host.Status().Update(ctx, m); err != nil {
			return false, err // conflicts are retried
		}
		return true, nil
	})
}

// applyEvidence writes what CAPI or the provider would show for a machine
// that was switched off.
func (l *Lab) applyEvidence(ctx context.Context, node string, ev Evidence) error {
	host, err := l.machineClient()
	if err != nil {
		return err
	}
	switch ev {
	case EvidenceNone:
		return nil
	case EvidencePoweredOffCondition:
		return l.updateMachineStatus(ctx, node, func(m *clusterv1.Machine) {
			meta.SetStatusCondition(&m.Status.Conditions, cond(l.opts.PowerOffConditionType, metav1.ConditionFalse,
				l.opts.PowerOffConditionReason, "Machine "+node+" is powered off", m.Generation))
		})
	case EvidenceMachineDeleted:
		m, err := l.Machine(ctx, node)
		if err != nil {
			return err
		}
		// The CAPI finalizer keeps the Machine visible while it is deleted.
		if err := host.Delete(ctx, m); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return l.updateMachineStatus(ctx, node, func(m *clusterv1.Machine) {
			g := m.Generation
			m.Status.Phase = string(clusterv1.MachinePhaseDeleting)
			for _, cd := range []metav1.Condition{
				cond(clusterv1.MachineInfrastructureReadyCondition, metav1.ConditionFalse, clusterv1.MachineInfrastructureDeletedReason,
					kwokMachineKind+" "+node+" has been deleted", g),
				cond(clusterv1.MachineDeletingCondition, metav1.ConditionTrue, clusterv1.MachineDeletingWaitingForVolumeDetachReason,
					"Waiting for Node volumes to be detached", g),
				cond(clusterv1.MachineReadyCondition, metav1.ConditionFalse, clusterv1.MachineNotReadyReason, "* Deleting: Machine deletion in progress", g),
				cond(clusterv1.MachineAvailableCondition, metav1.ConditionFalse, clusterv1.MachineNotReadyReason, "* Deleting: Machine deletion in progress", g),
			} {
				meta.SetStatusCondition(&m.Status.Conditions, cd)
			}
		})
	}
	return fmt.Errorf("unknown evidence %q", ev)
}

// clearEvidence undoes applyEvidence for a node that is back: the
// powered-off condition turns True; a deleted Machine is replaced by a new
// one (CAPI would create a replacement machine).
func (l *Lab) clearEvidence(ctx context.Context, cluster string, n NodeState) error {
	host, err := l.machineClient()
	if err != nil {
		return err
	}
	m, err := l.Machine(ctx, n.Name)
	if apierrors.IsNotFound(err) {
		return l.createMachine(ctx, host, cluster, n)
	}
	if err != nil {
		return err
	}
	if m.DeletionTimestamp != nil {
		// A patch, not an update: the lab's machine sync patches the status
		// concurrently, and a stale resourceVersion must not fail a restore.
		before := m.DeepCopy()
		m.Finalizers = nil
		if err := host.Patch(ctx, m, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := pollUntil(ctx, 30*time.Second, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
			err := host.Get(ctx, client.ObjectKeyFromObject(m), &clusterv1.Machine{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			return fmt.Errorf("Machine %s not gone: %w", n.Name, err)
		}
		return l.createMachine(ctx, host, cluster, n)
	}
	if meta.FindStatusCondition(m.Status.Conditions, l.opts.PowerOffConditionType) != nil {
		return l.updateMachineStatus(ctx, n.Name, func(m *clusterv1.Machine) {
			meta.SetStatusCondition(&m.Status.Conditions, cond(l.opts.PowerOffConditionType, metav1.ConditionTrue, "PoweredOn", "", m.Generation))
		})
	}
	return nil
}

// syncMachines plays CAPI's machine controller for node health: it mirrors
// each Node's Ready condition into its Machine's NodeReady, NodeHealthy,
// Ready and Available conditions.
func (l *Lab) syncMachines(ctx context.Context, st *State) error {
	host, err := l.machineClient()
	if err != nil {
		return err
	}
	for _, c := range st.Clusters[1:] {
		member, err := l.Client(c.Name)
		if err != nil {
			return err
		}
		// Only kwok-run nodes have Machines: static bulk nodes (thousands in
		// a scale lab) are left out by the API server, not sent each pass.
		nodes := &corev1.NodeList{}
		if err := member.List(ctx, nodes, notStaticNodes); err != nil {
			continue // a stopped member API server is a legitimate lab state
		}
		byName := map[string]*corev1.Node{}
		for i := range nodes.Items {
			byName[nodes.Items[i].Name] = &nodes.Items[i]
		}
		machines := &clusterv1.MachineList{}
		if err := host.List(ctx, machines, client.InNamespace(l.opts.MachineNamespace), client.MatchingLabels{clusterv1.ClusterNameLabel: c.Name}); err != nil {
			return err
		}
		for i := range machines.Items {
			m := &machines.Items[i]
			before := m.DeepCopy()
			setNodeConditions(m, byName[m.Status.NodeRef.Name])
			if conditionsEqual(before.Status.Conditions, m.Status.Conditions) {
				continue
			}
			if err := host.Status().Patch(ctx, m, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}

func setNodeConditions(m *clusterv1.Machine, n *corev1.Node) {
	g := m.Generation
	status, reason, msg := metav1.ConditionFalse, clusterv1.MachineNodeDoesNotExistReason, "Node does not exist"
	if n != nil {
		switch NodeReadyStatus(n) {
		case corev1.ConditionTrue:
			status, reason, msg = metav1.ConditionTrue, clusterv1.MachineNodeReadyReason, ""
		case corev1.ConditionFalse:
			status, reason, msg = metav1.ConditionFalse, clusterv1.MachineNodeNotReadyReason, "Node is not ready"
		default:
			status, reason, msg = metav1.ConditionUnknown, clusterv1.MachineNodeReadyUnknownReason, "Node Ready condition is Unknown"
		}
	}
	set := func(t string, s metav1.ConditionStatus, r, msg string) {
		meta.SetStatusCondition(&m.Status.Conditions, cond(t, s, r, msg, g))
	}
	set(clusterv1.MachineNodeReadyCondition, status, reason, msg)
	healthy := map[string]string{
		clusterv1.MachineNodeReadyReason:        clusterv1.MachineNodeHealthyReason,
		clusterv1.MachineNodeNotReadyReason:     clusterv1.MachineNodeNotHealthyReason,
		clusterv1.MachineNodeReadyUnknownReason: clusterv1.MachineNodeHealthUnknownReason,
		clusterv1.MachineNodeDoesNotExistReason: clusterv1.MachineNodeDoesNotExistReason,
	}
	set(clusterv1.MachineNodeHealthyCondition, status, healthy[reason], msg)
	if m.DeletionTimestamp != nil {
		return // Ready/Available already say the machine is being deleted
	}
	if status == metav1.ConditionTrue {
		set(clusterv1.MachineReadyCondition, metav1.ConditionTrue, clusterv1.MachineReadyReason, "")
		set(clusterv1.MachineAvailableCondition, metav1.ConditionTrue, clusterv1.MachineAvailableReason, "")
	} else {
		set(clusterv1.MachineReadyCondition, status, clusterv1.MachineNotReadyReason, "* NodeHealthy: "+msg)
		set(clusterv1.MachineAvailableCondition, metav1.ConditionFalse, clusterv1.MachineNotReadyReason, "* NodeHealthy: "+msg)
	}
}

func conditionsEqual(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		y := meta.FindStatusCondition(b, x.Type)
		if y == nil || y.Status != x.Status || y.Reason != x.Reason || y.Message != x.Message {
			return false
		}
	}
	return true
}
