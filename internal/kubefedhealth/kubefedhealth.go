// Package kubefedhealth reads kubefed's own verdict on a member cluster
// from its KubeFedCluster status: the second view fedfailover needs before
// it treats a member as failed. Pure: the time is passed in.
//
// kubefed v0.10.0 (pkg/controller/kubefedcluster) probes each member's
// /healthz every health check period (10 s by default) and writes the
// status after every probe, lastProbeTime included:
//   - /healthz answered "ok": Ready=True (reason ClusterReady);
//   - answered otherwise: Ready=False (ClusterNotReady) and Offline=False;
//   - no answer: Offline=True (ClusterNotReachable) and no Ready condition;
//   - no client (bad configuration): ClusterConfigMalformed=True.
//
// A changed result is written only after failureThreshold (3) or
// successThreshold (1) probes in a row; until then the old conditions stay
// and only lastProbeTime moves. kubefed's scheduler counts a member Ready
// only with Ready=True.
package kubefedhealth

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"
)

// MaxAge is how old kubefed's last probe may be for its Ready verdict to
// count as current: six health check periods at kubefed's default. An
// older one means kubefed's controller-manager stopped probing (or writing).
const MaxAge = time.Minute

// State is kubefed's verdict on a member.
type State string

const (
	// Ready: Ready=True, probed within MaxAge.
	Ready State = "Ready"
	// Stale: Ready=True, but the last probe is older than MaxAge (or
	// dated later than MaxAge ahead): kubefed's last word, not a current
	// one. It confirms nothing, failure or health.
	Stale State = "Stale"
	// NotReady: no Ready=True condition (Ready False or Unknown, Offline,
	// ConfigMalformed, no status yet): kubefed itself does not place
	// replicas there.
	NotReady State = "NotReady"
)

// View is kubefed's verdict and a sentence saying what it rests on.
type View struct {
	State   State
	Message string
}

// Confirmed reports whether kubefed too sees the member failed.
func (v View) Confirmed() bool { return v.State == NotReady }

// Of reads kubefed's verdict on the member. now and lastProbeTime are both
// the host's clock (kubefed runs in the host cluster and stamps its probe
// with its own clock there); nothing here compares a member's clock.
func Of(k *kubefedv1beta1.KubeFedCluster, now time.Time) View {
	var ready, offline *kubefedv1beta1.ClusterCondition
	for i := range k.Status.Conditions {
		switch c := &k.Status.Conditions[i]; c.Type {
		case "Ready":
			ready = c
		case "Offline":
			offline = c
		}
	}
	switch {
	case ready == nil && offline != nil && offline.Status == corev1.ConditionTrue:
		return View{NotReady, "kubefed reports it offline (not reachable)"}
	case ready == nil:
		return View{NotReady, "kubefed reports no Ready condition"}
	case ready.Status != corev1.ConditionTrue:
		return View{NotReady, fmt.Sprintf("kubefed reports Ready=%s", ready.Status)}
	}
	probed := ready.LastProbeTime.Time
	switch age := now.Sub(probed); {
	case probed.IsZero():
		return View{Stale, "kubefed reports it Ready, with no probe time"}
	case age > MaxAge:
		return View{Stale, fmt.Sprintf("kubefed's last report, Ready, is stale: probed %s ago (kubefed probes every 10s by default)", age.Round(time.Second))}
	case age < -MaxAge:
		return View{Stale, fmt.Sprintf("kubefed's last report, Ready, is dated %s ahead", (-age).Round(time.Second))}
	}
	return View{Ready, fmt.Sprintf("kubefed reports it Ready (probed %s ago)", max(now.Sub(probed), 0).Round(time.Second))}
}
