package fencing

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The kubelet's Lease in kube-node-lease (coordination.k8s.io/v1, named after
// the node) is renewed every quarter of its spec.leaseDurationSeconds (10 s
// of the default 40 s), with a few percent of jitter, and nothing else about
// the node changes that often: a Lease whose resourceVersion stays the same
// across two of fedfailover's own readings more than one renew interval
// apart was not renewed in between. That needs no clock but fedfailover's:
// the Lease's renewTime (the kubelet's clock) is compared only with itself,
// for equality.

// NodeLeaseNamespace is where kubelets keep their Leases.
const NodeLeaseNamespace = "kube-node-lease"

// DefaultLeaseDuration is the kubelet's nodeLeaseDurationSeconds default.
const DefaultLeaseDuration = 40 * time.Second

// LeaseSilenceMargin is added to the renew interval and the kubelet's
// jitter before a Lease not renewed counts as silent: the time the
// kubelet's own write takes (the next interval starts when it returns) and
// the API server's latency. It is not the proof that the machine is off
// (the Machine evidence is): it only has to make a kubelet that renews on
// time never look silent.
const LeaseSilenceMargin = time.Second

// leaseRenewJitter is the kubelet's jitter on its renew interval
// (k8s.io/component-helpers' lease controller waits up to 4 % longer).
const leaseRenewJitter = 25 // an interval's 1/25th: 4 %

// MinLeaseSilence bounds the silence window from below, whatever the Lease
// says its duration is: a short spec.leaseDurationSeconds written by someone
// else than the kubelet must not turn its real renew interval into silence.
const MinLeaseSilence = 5 * time.Second

// LeaseReading is one reading of a node's kubelet Lease.
type LeaseReading struct {
	// Version is the Lease's resourceVersion: any write changes it.
	Version string
	// RenewTime is spec.renewTime, on the kubelet's clock: compared only
	// with another RenewTime of the same Lease, for equality.
	RenewTime time.Time
	// Duration is spec.leaseDurationSeconds (DefaultLeaseDuration if unset).
	Duration time.Duration
	// Holder is spec.holderIdentity, for messages.
	Holder string
	// NotTheNodes says why the Lease is not this Node's (empty when it is):
	// its owner reference names another Node UID.
	NotTheNodes string
}

// ReadLease turns a Lease into a reading for the Node with uid nodeUID.
func ReadLease(l *coordinationv1.Lease, nodeUID types.UID) LeaseReading {
	r := LeaseReading{Version: l.ResourceVersion, Duration: DefaultLeaseDuration}
	if l.Spec.RenewTime != nil {
		r.RenewTime = l.Spec.RenewTime.Time
	}
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		r.Duration = time.Duration(*d) * time.Second
	}
	if l.Spec.HolderIdentity != nil {
		r.Holder = *l.Spec.HolderIdentity
	}
	// The kubelet makes its Node the Lease's owner; a Lease owned by another
	// Node of the same name (deleted and re-created) says nothing of this one.
	for _, o := range l.OwnerReferences {
		if o.Kind == "Node" && o.UID != "" && nodeUID != "" && o.UID != nodeUID {
			r.NotTheNodes = fmt.Sprintf("Lease %s/%s belongs to Node uid %s, not %s", l.Namespace, l.Name, o.UID, nodeUID)
		}
	}
	return r
}

// Renewed reports whether later shows a write to the Lease since first.
func Renewed(first, later LeaseReading) bool {
	return first.Version != later.Version || !first.RenewTime.Equal(later.RenewTime)
}

// SilenceWindow is how long a Lease must stay unchanged between two of
// fedfailover's readings to count as not renewed: one renew interval
// (a quarter of the duration) and its 4 % jitter, plus
// LeaseSilenceMargin, at least MinLeaseSilence. 11.4 s for the kubelet's
// default 40 s.
func SilenceWindow(duration time.Duration) time.Duration {
	if duration <= 0 {
		duration = DefaultLeaseDuration
	}
	interval := duration / 4
	return max(interval+interval/leaseRenewJitter+LeaseSilenceMargin, MinLeaseSilence)
}

// LeaseSighting is what fedfailover's own readings of one Node's Lease say:
// the first reading of the Lease's current version, when it was taken and
// when it was last read unchanged, on fedfailover's clock.
type LeaseSighting struct {
	// NodeUID is the Node the readings are for.
	NodeUID types.UID
	// First is the first reading of the current version.
	First LeaseReading
	// FirstAt is when First was read; LastAt when the same version was last
	// read (host clock).
	FirstAt, LastAt time.Time
	// Window is the silence window: the largest of the versions read since
	// FirstAt (a shorter duration written later never shortens it).
	Window time.Duration
	// RenewedAt is when fedfailover first read a version different from an
	// earlier reading of its own (host clock): the kubelet was seen alive
	// then. Zero when no change was read.
	RenewedAt time.Time
}

// ObserveLease folds a new reading, taken at now, into prev. A Node of
// another UID starts afresh; a new version of the Lease restarts the
// silence from now and notes the renewal.
func ObserveLease(prev LeaseSighting, nodeUID types.UID, r LeaseReading, now time.Time) LeaseSighting {
	w := SilenceWindow(r.Duration)
	if prev.FirstAt.IsZero() || prev.NodeUID != nodeUID {
		return LeaseSighting{NodeUID: nodeUID, First: r, FirstAt: now, LastAt: now, Window: w}
	}
	if Renewed(prev.First, r) {
		return LeaseSighting{NodeUID: nodeUID, First: r, FirstAt: now, LastAt: now, Window: max(w, prev.Window), RenewedAt: now}
	}
	next := prev
	next.LastAt = now
	next.Window = max(prev.Window, w)
	return next
}

// Silence is the verdict on a LeaseSighting.
type Silence struct {
	// Silent: the Lease was read unchanged over at least Window.
	Silent bool
	// For is how long it has been read unchanged (LastAt - FirstAt).
	For time.Duration
	// Remaining is how much longer it must stay unchanged; 0 when Silent.
	Remaining time.Duration
	// Why says why it is not silent (empty when it is).
	Why string
}

// Silent decides whether the kubelet is silent by the sighting alone: two
// readings of the same version at least Window apart, both on fedfailover's
// clock.
func (s LeaseSighting) Silent() Silence {
	switch {
	case s.FirstAt.IsZero():
		return Silence{Why: "its kubelet Lease was not read"}
	case s.First.NotTheNodes != "":
		return Silence{Why: s.First.NotTheNodes}
	}
	d := s.LastAt.Sub(s.FirstAt)
	if d >= s.Window {
		return Silence{Silent: true, For: d}
	}
	return Silence{For: d, Remaining: s.Window - d,
		Why: fmt.Sprintf("its kubelet Lease has been read unchanged for %s only, silent after %s", d.Round(time.Second), s.Window)}
}

// Describe says, for records and events, how long the Lease was seen
// unchanged.
func (s Silence) Describe() string {
	return fmt.Sprintf("kubelet Lease not renewed for %s as seen by fedfailover", s.For.Round(time.Second))
}

// EvidenceOfOff is the verdict on the evidence alone, for a node whose
// kubelet is not known to be silent yet: whether there is positive evidence
// that its machine is off, whatever its Ready condition says. fedfailover
// reads a node's kubelet Lease only when it finds such evidence; the node is
// lost by it only once the Lease is silent too (Input.KubeletSilent).
func EvidenceOfOff(in Input) Result {
	in.KubeletSilent = "not known yet"
	return Verdict(in)
}
