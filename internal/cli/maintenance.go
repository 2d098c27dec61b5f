package cli

import (
	"context"
	"io"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// KindMaintenanceReport is `kubectl failover maintenance`.
const KindMaintenanceReport = "MaintenanceReport"

// MaintenanceView is the planned maintenance of the members, as the
// MemberMaintenances' status says it (the manager writes it).
type MaintenanceView struct {
	Time         time.Time         `json:"time"`
	Maintenances []MaintenanceItem `json:"maintenances"`
}

// MaintenanceItem is one MemberMaintenance.
type MaintenanceItem struct {
	Name   string `json:"name"`
	Member string `json:"member"`
	Force  bool   `json:"force,omitempty"`
	// Accepted and Drained are the conditions' status ("True", "False",
	// "Unknown" when the manager has not written it yet), with their
	// reasons and messages.
	Accepted        string `json:"accepted"`
	AcceptedReason  string `json:"acceptedReason,omitempty"`
	AcceptedMessage string `json:"acceptedMessage,omitempty"`
	Drained         string `json:"drained"`
	DrainedReason   string `json:"drainedReason,omitempty"`
	// Progress is e.g. "12 of 30 replicas moved off member1, 3 not Ready
	// yet on member2, 3 waiting for room on the other members".
	Progress       string                    `json:"progress,omitempty"`
	Moved          int32                     `json:"moved"`
	Share          int32                     `json:"share"`
	Pending        int32                     `json:"pending"`
	WaitingForRoom int32                     `json:"waitingForRoom"`
	RSPs           []v1alpha1.MaintenanceRSP `json:"rsps,omitempty"`
	Created        *metav1.Time              `json:"created,omitempty"`
}

// GatherMaintenances reads every MemberMaintenance of the host.
func GatherMaintenances(ctx context.Context, r client.Reader) ([]v1alpha1.MemberMaintenance, error) {
	var list v1alpha1.MemberMaintenanceList
	if err := r.List(ctx, &list); err != nil {
		return nil, Explain(err, resMemberMaintenances, "")
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.MemberMaintenance) int { return strings.Compare(a.Name, b.Name) })
	return list.Items, nil
}

// BuildMaintenance is the view of mms (of member only, when given).
func BuildMaintenance(mms []v1alpha1.MemberMaintenance, member string, now time.Time) MaintenanceView {
	v := MaintenanceView{Time: now, Maintenances: []MaintenanceItem{}}
	for i := range mms {
		mm := &mms[i]
		if member != "" && mm.Spec.Member != member {
			continue
		}
		it := MaintenanceItem{Name: mm.Name, Member: mm.Spec.Member, Force: mm.Spec.Force, Accepted: string(metav1.ConditionUnknown),
			Drained: string(metav1.ConditionUnknown), Progress: mm.Status.Progress, Moved: mm.Status.Moved, Share: mm.Status.Share,
			Pending: mm.Status.Pending, WaitingForRoom: mm.Status.WaitingForRoom, RSPs: mm.Status.RSPs, Created: createdOf(mm)}
		// A condition of an older generation says nothing of this one.
		if c := meta.FindStatusCondition(mm.Status.Conditions, v1alpha1.ConditionAccepted); c != nil && c.ObservedGeneration == mm.Generation {
			it.Accepted, it.AcceptedReason, it.AcceptedMessage = string(c.Status), c.Reason, c.Message
		}
		if c := meta.FindStatusCondition(mm.Status.Conditions, v1alpha1.ConditionDrained); c != nil && c.ObservedGeneration == mm.Generation {
			it.Drained, it.DrainedReason = string(c.Status), c.Reason
		}
		v.Maintenances = append(v.Maintenances, it)
	}
	return v
}

func createdOf(mm *v1alpha1.MemberMaintenance) *metav1.Time {
	if mm.CreationTimestamp.IsZero() {
		return nil
	}
	t := mm.CreationTimestamp
	return &t
}

// RenderMaintenance prints the view as a table; wide adds the reasons and
// the answer to the request.
func RenderMaintenance(w io.Writer, v MaintenanceView, wide bool) error {
	if len(v.Maintenances) == 0 {
		_, err := io.WriteString(w, "No MemberMaintenance: no member is under maintenance.\n")
		return err
	}
	headers := []string{"NAME", "MEMBER", "ACCEPTED", "DRAINED", "PROGRESS", "AGE"}
	if wide {
		headers = append(headers, "FORCE", "REASON", "MESSAGE")
	}
	t := newTable(w, headers...)
	for _, it := range v.Maintenances {
		progress := it.Progress
		if it.Accepted != string(metav1.ConditionTrue) {
			progress = "not accepted: " + orDash(it.AcceptedReason)
		}
		row := []string{it.Name, it.Member, it.Accepted, it.Drained, orDash(progress), age(it.Created, v.Time)}
		if wide {
			row = append(row, yesNo(it.Force), orDash(it.AcceptedReason), orDash(oneLine(it.AcceptedMessage)))
		}
		t.add(row...)
	}
	return t.flush()
}

// MaintenanceReport is the maintenance view as an object.
type MaintenanceReport struct {
	metav1.TypeMeta `json:",inline"`
	MaintenanceView `json:",inline"`
}

// NewMaintenanceReport wraps a maintenance view.
func NewMaintenanceReport(v MaintenanceView) *MaintenanceReport {
	return &MaintenanceReport{TypeMeta: typeMeta(KindMaintenanceReport), MaintenanceView: v}
}

// Objects: the MemberMaintenances, as the table lists them.
func (r *MaintenanceReport) Objects() []runtime.Object {
	var out []runtime.Object
	for _, it := range r.Maintenances {
		out = append(out, ref(v1alpha1.GroupVersion.WithKind("MemberMaintenance"), "", it.Name))
	}
	return out
}

// DeepCopyObject copies the report through JSON, the form every printer
// reads.
func (r *MaintenanceReport) DeepCopyObject() runtime.Object { return copyThroughJSON(r) }
