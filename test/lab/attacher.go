package lab

import (
	"context"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// attacherFinalizer is the finalizer the CSI external-attacher puts on the
// VolumeAttachments it attached.
var attacherFinalizer = "external-attacher/" + strings.ReplaceAll(CSIDriverName, ".", "-")

// controllerPeriod is how often the lab's own controllers reconcile. Polling
// a handful of objects keeps them simple and restart-proof.
const controllerPeriod = 500 * time.Millisecond

// startControllers runs the lab's own controllers (CSI attacher per member,
// Machine node-health mirroring, the node monitor without the
// node-lifecycle controller) until Down.
func (l *Lab) startControllers() {
	ctx, cancel := context.WithCancel(context.Background())
	l.bgCancel = cancel
	l.bgDone.Go(func() {
		lastErr := ""
		for {
			err := l.controllersOnce(ctx)
			if err != nil && ctx.Err() == nil && err.Error() != lastErr {
				l.logf("lab: controllers: %v", err)
			}
			if err != nil {
				lastErr = err.Error()
			} else {
				lastErr = ""
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(controllerPeriod):
			}
		}
	})
}

func (l *Lab) controllersOnce(ctx context.Context) error {
	st, err := l.State()
	if err != nil {
		return err
	}
	var firstErr error
	monitor := l.opts.NoNodeLifecycle && time.Since(l.lastMonitor) >= monitorPeriod
	if monitor {
		l.lastMonitor = time.Now()
	}
	for _, c := range st.Clusters[1:] {
		if err := l.attachOnce(ctx, st, c); err != nil && firstErr == nil {
			firstErr = err
		}
		if monitor {
			if err := l.monitorNodesOnce(ctx, st, c); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	if err := l.syncMachines(ctx, st); err != nil && firstErr == nil {
		firstErr = err
	}
	if err := l.superviseExited(st); err != nil && firstErr == nil {
		firstErr = err
	}
	return firstErr
}

// superviseExited starts again, as the kubelet restarts a crashed static
// pod or systemd a crashed unit on a real host, the control-plane processes
// that exit on purpose and that no fault stops:
//   - the kubefed controller-manager exits when it cannot renew its leader
//     lock in time, which a slow API server on a loaded machine can cause;
//   - a member's kube-scheduler exits (klog.FlushAndExit) when its cache
//     finds a pod bound to another node than it assumed, which a binding
//     racing an API server restart can cause ("Scheduler cache is
//     corrupted"); its kube-controller-manager likewise on fatal errors.
//
// Without this the lab would silently lose federation or scheduling for
// every later test. The restart is logged with the old process's last
// lines. Members' API servers and etcds are not restarted: faults stop
// them on purpose.
func (l *Lab) superviseExited(st *State) error {
	keys := []string{HostName + "/" + CompKubefedCM}
	for _, c := range st.Clusters[1:] {
		keys = append(keys, c.Name+"/"+CompScheduler, c.Name+"/"+CompKCM)
	}
	var firstErr error
	for _, key := range keys {
		p := st.Proc(key)
		if p == nil || procState(p.PID) != ProcGone {
			continue
		}
		l.logf("lab: %s (pid %d) exited (%s); restarting it. Its last lines:\n%s", p.Key(), p.PID, exitReason(p.Log), logTail(p.Log, 8))
		// No readiness wait: the attacher shares this loop and must not stall.
		if _, err := l.restartProc(context.Background(), p.Key(), nil); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// NodeAlive reports whether the node's kwok process runs (not killed, not
// stopped). It is the lab's ground truth for "the machine is powered and
// reachable".
func (st *State) NodeAlive(cluster, node string) bool {
	p := st.Proc(cluster + "/" + CompKwok + "/" + node)
	return p != nil && procState(p.PID) == ProcRunning
}

// attachOnce plays the CSI external-attacher and a kubelet's volume manager
// for one member.
func (l *Lab) attachOnce(ctx context.Context, st *State, c *ClusterState) error {
	if p := st.Proc(c.Name + "/" + CompAPIServer); p == nil || procState(p.PID) != ProcRunning {
		return nil // member API server down on purpose
	}
	if !l.attachDue(c.Name) {
		return nil
	}
	cl, err := l.Client(c.Name)
	if err != nil {
		return err
	}
	vas := &storagev1.VolumeAttachmentList{}
	if err := cl.List(ctx, vas); err != nil {
		return err
	}
	attached := map[string]bool{} // pv + "/" + node
	for i := range vas.Items {
		va := &vas.Items[i]
		if va.Spec.Attacher != CSIDriverName || va.Spec.Source.PersistentVolumeName == nil {
			continue
		}
		pv := *va.Spec.Source.PersistentVolumeName
		switch {
		case va.DeletionTimestamp != nil:
			// Detach: a controller-side detach works even for a dead node
			// (the storage backend detaches from a powered-off machine).
			if removeString(&va.Finalizers, attacherFinalizer) {
				if err := cl.Update(ctx, va); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
					return err
				}
			}
		case va.Status.Attached:
			attached[pv+"/"+va.Spec.NodeName] = true
		case st.NodeAlive(c.Name, va.Spec.NodeName):
			if !hasString(va.Finalizers, attacherFinalizer) {
				va.Finalizers = append(va.Finalizers, attacherFinalizer)
				if err := cl.Update(ctx, va); err != nil {
					if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
						continue
					}
					return err
				}
			}
			va.Status.Attached = true
			va.Status.AttachmentMetadata = map[string]string{"devicePath": "/dev/lab/" + pv}
			va.Status.AttachError = nil
			if err := cl.Status().Update(ctx, va); err != nil {
				if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
					continue
				}
				return err
			}
			attached[pv+"/"+va.Spec.NodeName] = true
		}
	}
	return l.markPodsAttached(ctx, cl, attached)
}

// attachDue says whether the attacher's pass over cluster is due
// (Options.AttachEvery), and if so notes it.
func (l *Lab) attachDue(cluster string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if last, ok := l.lastAttach[cluster]; ok && now.Sub(last) < l.opts.AttachEvery {
		return false
	}
	if l.lastAttach == nil {
		l.lastAttach = map[string]time.Time{}
	}
	l.lastAttach[cluster] = now
	return true
}

// markPodsAttached annotates pending PVC pods whose volumes are all attached
// to their own node, which lets kwok's pod-ready stage start them.
func (l *Lab) markPodsAttached(ctx context.Context, cl client.Client, attached map[string]bool) error {
	// Only Pending pods can need the mark, and never scale pods (they carry
	// it from the start): the API server filters, so a member with tens of
	// thousands of pods costs little here.
	notScale, err := labels.NewRequirement(ScaleLabel, selection.DoesNotExist, nil)
	if err != nil {
		return err
	}
	pods := &corev1.PodList{}
	if err := cl.List(ctx, pods, client.MatchingFields{"status.phase": string(corev1.PodPending)},
		client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*notScale)}); err != nil {
		return err
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodPending ||
			pod.Annotations[AttachedAnnotation] == "true" {
			continue
		}
		claims := 0
		ok := true
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			claims++
			pvc := &corev1.PersistentVolumeClaim{}
			if err := cl.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: v.PersistentVolumeClaim.ClaimName}, pvc); err != nil ||
				pvc.Spec.VolumeName == "" || !attached[pvc.Spec.VolumeName+"/"+pod.Spec.NodeName] {
				ok = false
				break
			}
		}
		if claims == 0 || !ok {
			continue
		}
		patch := client.MergeFrom(pod.DeepCopy())
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[AttachedAnnotation] = "true"
		if err := cl.Patch(ctx, pod, patch); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func removeString(list *[]string, s string) bool {
	out := (*list)[:0]
	found := false
	for _, x := range *list {
		if x == s {
			found = true
			continue
		}
		out = append(out, x)
	}
	*list = out
	return found
}

// exitReason finds why a Go program stopped in its log: the last panic,
// fatal error or klog fatal (F...) line, or the leader election loss.
func exitReason(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "no log"
	}
	reason := "no reason in its log"
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "panic:"), strings.HasPrefix(line, "fatal error:"),
			len(line) > 5 && line[0] == 'F' && line[1] >= '0' && line[1] <= '9',
			strings.Contains(line, "leaderelection lost"), strings.Contains(line, "leader election lost"):
			reason = line
		}
	}
	return reason
}
