package noderecovery

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func cut(key string) (string, string, bool) { return strings.Cut(key, "/") }

func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t) }

func isNoMatch(err error) bool { return meta.IsNoMatchError(err) }

// selects matches KubeFedCluster labels; an absent or empty selector selects
// every member, an invalid one none.
func selects(sel *metav1.LabelSelector, set map[string]string) bool {
	if sel == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	return s.Matches(labels.Set(set))
}
