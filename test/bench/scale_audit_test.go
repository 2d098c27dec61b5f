package bench

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// The breakdown counts only the manager's completed writes received in the
// window, names the Lease each Lease write is to, and tells its leader
// election renewals apart (not another client's Lease).
func TestHostWritesFromAudit(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	line := func(at time.Duration, stage, agent, verb, res, sub, ns, name string, code int) string {
		return `{"stage":"` + stage + `","verb":"` + verb + `","userAgent":"` + agent + `","requestReceivedTimestamp":"` +
			t0.Add(at).Format(time.RFC3339Nano) + `","objectRef":{"resource":"` + res + `","subresource":"` + sub +
			`","namespace":"` + ns + `","name":"` + name + `"},"responseStatus":{"code":` + strconv.Itoa(code) + `}}`
	}
	const mgr, kubefed = "fedfailover-manager/v0.0.0 (linux/amd64)", "controller-manager/v0.0.0"
	log := strings.Join([]string{
		line(-time.Second, "ResponseComplete", mgr, "update", "failoverpolicies", "status", "ns", "p", 200), // before
		line(time.Second, "ResponseComplete", mgr, "update", "leases", "", "kube-federation-system", scLeaderElectionLease, 200),
		line(3*time.Second, "ResponseComplete", mgr, "update", "leases", "", "kube-federation-system", scLeaderElectionLease, 200),
		line(4*time.Second, "ResponseComplete", kubefed, "update", "leases", "", "kube-federation-system", "kubefed", 200),
		line(5*time.Second, "ResponseComplete", mgr, "update", "failoverpolicies", "status", "ns", "p", 200),
		line(6*time.Second, "ResponseComplete", mgr, "update", "failoverpolicies", "status", "ns", "p", 409),
		strings.Replace(line(6*time.Second, "ResponseComplete", mgr, "patch", "failoverpolicies", "status", "ns", "p", 200), `{`,
			`{"requestURI":"/apis/failover.fedfailover.io/v1alpha1/namespaces/ns/failoverpolicies/p/status?fieldManager=fedfailover-members&force=true",`, 1),
		line(6*time.Second, "ResponseStarted", mgr, "create", "events", "", "ns", "p.1", 0),
		line(7*time.Second, "ResponseComplete", mgr, "get", "failoverpolicies", "", "ns", "p", 200),
		line(8*time.Second, "ResponseComplete", mgr, "create", "events", "", "ns", "p.2", 201),
		`{"stage":"ResponseCompl`, // a line being written
		line(10*time.Second, "ResponseComplete", mgr, "patch", "events", "", "ns", "p.2", 200), // at the end: outside
	}, "\n")
	got, renewals, past, err := hostWritesFromAudit(strings.NewReader(log), t0, t0.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"update leases kube-federation-system/" + scLeaderElectionLease: 2,
		"update failoverpolicies/status":                                1,
		"update failoverpolicies/status (409)":                          1,
		"patch failoverpolicies/status by fedfailover-members":          1,
		"create events": 1,
	}
	if len(got) != len(want) {
		t.Errorf("writes %+v, want %v", got, want)
	}
	for _, w := range got {
		if want[w.Request] != w.Count {
			t.Errorf("%s: %d, want %d", w.Request, w.Count, want[w.Request])
		}
	}
	if got[0].Count != 2 || got[0].PerSecond != 0.2 {
		t.Errorf("first %+v, want the Lease's 2 (0.2/s): most frequent first", got[0])
	}
	if renewals != 2 || !past {
		t.Errorf("renewals %d (want 2: not kubefed's Lease), past %t (want true: an entry at the window's end)", renewals, past)
	}
	if _, _, past, _ := hostWritesFromAudit(strings.NewReader(log), t0, t0.Add(time.Minute)); past {
		t.Error("past with no entry after the window: the breakdown would read before the log holds it")
	}
}
