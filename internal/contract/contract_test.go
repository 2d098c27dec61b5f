package contract

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 890123456, time.UTC)

func TestNodeMarksRoundTrip(t *testing.T) {
	cases := map[string]NodeMarks{
		"none": {},
		"lost": {LostSince: t0},
		"tainted": {LostSince: t0.Add(-time.Minute), FencedBy: "MachineInfrastructureDeleted", FencedAt: t0,
			Action: v1alpha1.RecoveryMethodOutOfServiceTaint, TaintedByUs: true, Claims: []string{"ns/a", "ns/b"}},
		"recovered": {FencedBy: "MachinePoweredOff", FencedAt: t0, Action: v1alpha1.RecoveryMethodForceDelete,
			RecoveredAt: t0.Add(3 * time.Second)},
		"another time zone": {LostSince: t0.In(time.FixedZone("X", 3600))},
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeNodeMarks(m.Annotations())
			if err != nil {
				t.Fatal(err)
			}
			if !got.LostSince.Equal(m.LostSince) || !got.FencedAt.Equal(m.FencedAt) || !got.RecoveredAt.Equal(m.RecoveredAt) {
				t.Errorf("times: got %+v, want %+v", got, m)
			}
			got.LostSince, got.FencedAt, got.RecoveredAt = m.LostSince, m.FencedAt, m.RecoveredAt
			if !reflect.DeepEqual(got, m) {
				t.Errorf("got %+v, want %+v", got, m)
			}
			if got.Acted() != (m.Action != "") {
				t.Errorf("Acted() = %v", got.Acted())
			}
		})
	}
}

func TestNodeMarksEncoding(t *testing.T) {
	claims := make([]string, MaxClaims+5)
	for i := range claims {
		claims[i] = "ns/c"
	}
	a := NodeMarks{FencedAt: t0, Action: v1alpha1.RecoveryMethodForceDelete, Claims: claims}.Annotations()
	if got := strings.Count(a[AnnotationClaims], ",") + 1; got != MaxClaims {
		t.Errorf("%d claims kept, want %d", got, MaxClaims)
	}
	if a[AnnotationFencedAt] != "2026-03-04T05:06:07.890123456Z" {
		t.Errorf("fenced-at %q: want UTC RFC 3339 with nanoseconds", a[AnnotationFencedAt])
	}
	if _, ok := a[AnnotationTaintedBy]; ok {
		t.Error("tainted-by written for a marks without the taint")
	}
	for k := range a {
		if !strings.HasPrefix(k, Prefix) {
			t.Errorf("key %s lacks the prefix", k)
		}
	}
	if !HasNodeMarks(map[string]string{AnnotationRecoveredAt: ""}) || HasNodeMarks(map[string]string{"other": "x"}) {
		t.Error("HasNodeMarks must see any mark, even empty, and nothing else")
	}
}

func TestNodeMarksMalformed(t *testing.T) {
	cases := map[string]struct {
		annotations map[string]string
		bad         string
	}{
		"lost-since":   {map[string]string{AnnotationLostSince: "yesterday", AnnotationAction: "ForceDelete"}, AnnotationLostSince},
		"fenced-at":    {map[string]string{AnnotationFencedAt: "2026-13-01T00:00:00Z", AnnotationAction: "ForceDelete"}, AnnotationFencedAt},
		"recovered-at": {map[string]string{AnnotationRecoveredAt: "1", AnnotationAction: "ForceDelete"}, AnnotationRecoveredAt},
		"tainted-by":   {map[string]string{AnnotationTaintedBy: "yes", AnnotationAction: "ForceDelete"}, AnnotationTaintedBy},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := DecodeNodeMarks(c.annotations)
			if err == nil || !strings.Contains(err.Error(), c.bad) {
				t.Fatalf("error %v, want one naming %s", err, c.bad)
			}
			if m.Action != v1alpha1.RecoveryMethodForceDelete || m.TaintedByUs || !m.LostSince.IsZero() || !m.FencedAt.IsZero() || !m.RecoveredAt.IsZero() {
				t.Errorf("marks %+v: the bad mark must read as unset, the others as written", m)
			}
		})
	}
}

func TestStormRoundTrip(t *testing.T) {
	for name, s := range map[string]Storm{"active": {Active: true}, "cooling down": {Active: true, EndedAt: t0}} {
		t.Run(name, func(t *testing.T) {
			v, keep := EncodeStorm(s)
			if !keep {
				t.Fatal("an active storm must be kept")
			}
			got, err := DecodeStorm(map[string]string{AnnotationStorm: v})
			if err != nil {
				t.Fatal(err)
			}
			if got.Active != s.Active || !got.EndedAt.Equal(s.EndedAt) {
				t.Errorf("got %+v, want %+v (from %s)", got, s, v)
			}
		})
	}
	if _, keep := EncodeStorm(Storm{EndedAt: t0}); keep {
		t.Error("no active storm must remove the annotation")
	}
	if got, err := DecodeStorm(nil); err != nil || got != (Storm{}) {
		t.Errorf("absent: %+v, %v", got, err)
	}
	if _, err := DecodeStorm(map[string]string{AnnotationStorm: "{active"}); err == nil || !strings.Contains(err.Error(), AnnotationStorm) {
		t.Errorf("malformed: error %v, want one naming %s", err, AnnotationStorm)
	}
}

func TestRebalanceStateRoundTrip(t *testing.T) {
	at := metav1.NewTime(t0.Truncate(time.Second))
	applied := Placement{TotalReplicas: 6, Clusters: map[string]fedschedv1a1.ClusterPreferences{
		"m1": {MinReplicas: 6, MaxReplicas: ptr.To[int64](6), Weight: 6}, "m2": {MaxReplicas: ptr.To[int64](0)}}}
	s := &RebalanceState{Policy: "p", Baseline: Placement{TotalReplicas: 6, Clusters: map[string]fedschedv1a1.ClusterPreferences{"m1": {Weight: 1}, "m2": {Weight: 1}}},
		Applied: &applied, LastChange: &at, Members: map[string]MemberTimers{"m1": {RoomSince: &at}, "m2": {FailingSince: &at}}}
	got, err := DecodeRebalanceState(map[string]string{AnnotationRebalance: s.Encode()})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Baseline.Equal(s.Baseline) || !got.Applied.Equal(*s.Applied) || got.Policy != "p" || !got.LastChange.Equal(s.LastChange) ||
		!got.Members["m1"].RoomSince.Equal(&at) || !got.Members["m2"].FailingSince.Equal(&at) || got.Members["m2"].RoomSince != nil {
		t.Errorf("got %s, want %s", got.Encode(), s.Encode())
	}
	if got.Encode() != s.Encode() {
		t.Errorf("re-encoding differs:\n%s\n%s", got.Encode(), s.Encode())
	}
	if none, err := DecodeRebalanceState(map[string]string{"other": "x"}); none != nil || err != nil {
		t.Errorf("absent: %v, %v", none, err)
	}
	if _, err := DecodeRebalanceState(map[string]string{AnnotationRebalance: "{"}); err == nil || !strings.Contains(err.Error(), AnnotationRebalance) {
		t.Errorf("malformed: error %v, want one naming %s", err, AnnotationRebalance)
	}
}

func TestPlacementEqualAndClone(t *testing.T) {
	a := Placement{TotalReplicas: 3, Clusters: map[string]fedschedv1a1.ClusterPreferences{"m": {MaxReplicas: ptr.To[int64](0)}}}
	b := Placement{TotalReplicas: 3, Clusters: map[string]fedschedv1a1.ClusterPreferences{"m": {}}}
	if a.Equal(b) {
		t.Fatal("maxReplicas 0 and unset must differ")
	}
	if !(Placement{TotalReplicas: 1, Clusters: map[string]fedschedv1a1.ClusterPreferences{}}).Equal(Placement{TotalReplicas: 1}) {
		t.Fatal("an empty and a nil cluster map must be equal")
	}
	s := &RebalanceState{Baseline: a, Applied: &a, Members: map[string]MemberTimers{"m": {}}}
	c := s.Clone()
	*c.Baseline.Clusters["m"].MaxReplicas = 5
	c.Applied.TotalReplicas = 9
	c.Members["x"] = MemberTimers{}
	if *a.Clusters["m"].MaxReplicas != 0 || s.Applied.TotalReplicas != 3 || len(s.Members) != 1 {
		t.Fatal("Clone shares state with the original")
	}
	if (*RebalanceState)(nil).Clone() != nil {
		t.Fatal("Clone of nil")
	}
}

func TestCAPIClusterRef(t *testing.T) {
	cases := map[string]struct {
		value string
		want  CAPIClusterRef
		set   bool
		bad   bool
	}{
		"absent":          {"", CAPIClusterRef{}, false, false},
		"namespaced":      {"capi/prod", CAPIClusterRef{Namespace: "capi", Name: "prod"}, true, false},
		"bare name":       {"prod", CAPIClusterRef{Name: "prod"}, true, false},
		"empty name":      {"capi/", CAPIClusterRef{}, true, true},
		"empty namespace": {"/prod", CAPIClusterRef{}, true, true},
		"two slashes":     {"a/b/c", CAPIClusterRef{}, true, true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			a := map[string]string{}
			if c.value != "" {
				a[AnnotationCAPICluster] = c.value
			}
			got, set, err := DecodeCAPICluster(a)
			if (err != nil) != c.bad || set != c.set || got != c.want {
				t.Fatalf("got %+v set=%v err=%v; want %+v set=%v error=%v", got, set, err, c.want, c.set, c.bad)
			}
			if err != nil && !strings.Contains(err.Error(), AnnotationCAPICluster) {
				t.Errorf("error %v does not name the annotation", err)
			}
			if set && !c.bad && got.String() != c.value {
				t.Errorf("String() = %q, want %q", got.String(), c.value)
			}
		})
	}
}

func TestDecodeCAPIManagementCluster(t *testing.T) {
	cases := []struct {
		value   string
		want    string
		set     bool
		wantErr string
	}{
		{"", "", false, ""},
		{"mgmt-kubeconfig", "mgmt-kubeconfig", true, ""},
		{"other-ns/mgmt-kubeconfig", "", true, "references to another namespace are not followed"},
		{"Not_A_Name", "", true, "is not a Secret name"},
	}
	for _, c := range cases {
		got, set, err := DecodeCAPIManagementCluster(map[string]string{AnnotationCAPIManagementCluster: c.value})
		if got != c.want || set != c.set || (err == nil) != (c.wantErr == "") || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%q: got %q %v %v, want %q %v %q", c.value, got, set, err, c.want, c.set, c.wantErr)
		}
	}
	if _, set, err := DecodeCAPIManagementCluster(nil); set || err != nil {
		t.Errorf("absent: set %v err %v", set, err)
	}
}
