package kubefedhealth

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kubefed/pkg/apis/core/common"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func kfc(conds ...kubefedv1beta1.ClusterCondition) *kubefedv1beta1.KubeFedCluster {
	return &kubefedv1beta1.KubeFedCluster{Status: kubefedv1beta1.KubeFedClusterStatus{Conditions: conds}}
}

func cond(t string, s corev1.ConditionStatus, probed time.Time) kubefedv1beta1.ClusterCondition {
	return kubefedv1beta1.ClusterCondition{Type: common.ClusterConditionType(t), Status: s, LastProbeTime: metav1.NewTime(probed)}
}

// The conditions kubefed v0.10.0 writes (clusterclient.go GetClusterStatus)
// and what fedfailover makes of them.
func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		k      *kubefedv1beta1.KubeFedCluster
		want   State
		saying string
	}{
		{"healthz ok, probed now", kfc(cond("Ready", corev1.ConditionTrue, now.Add(-3*time.Second))), Ready, "probed 3s ago"},
		{"healthz not ok", kfc(cond("Ready", corev1.ConditionFalse, now), cond("Offline", corev1.ConditionFalse, now)), NotReady, "Ready=False"},
		{"not reachable: Offline alone", kfc(cond("Offline", corev1.ConditionTrue, now)), NotReady, "offline"},
		{"config malformed", kfc(cond("ClusterConfigMalformed", corev1.ConditionTrue, now)), NotReady, "no Ready condition"},
		{"no status yet", kfc(), NotReady, "no Ready condition"},
		{"Ready, kubefed stopped probing", kfc(cond("Ready", corev1.ConditionTrue, now.Add(-5*time.Minute))), Stale, "probed 5m0s ago"},
		{"Ready, probe dated ahead", kfc(cond("Ready", corev1.ConditionTrue, now.Add(time.Hour))), Stale, "ahead"},
		{"Ready, no probe time", kfc(cond("Ready", corev1.ConditionTrue, time.Time{})), Stale, "no probe time"},
		{"Ready at the limit", kfc(cond("Ready", corev1.ConditionTrue, now.Add(-MaxAge))), Ready, "Ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Of(tc.k, now)
			if v.State != tc.want || !strings.Contains(v.Message, tc.saying) {
				t.Errorf("Of = %+v, want %s saying %q", v, tc.want, tc.saying)
			}
			if v.Confirmed() != (tc.want == NotReady) {
				t.Errorf("Confirmed = %v", v.Confirmed())
			}
		})
	}
}
