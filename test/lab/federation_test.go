package lab

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The lab runs kubefed as users do unless asked for the tuned timings.
func TestKubefedTimings(t *testing.T) {
	for _, tc := range []struct {
		opt, env            string
		period, unavailable string
		failures            int64
		wantErr             bool
	}{
		{opt: "", env: "", period: "10s", unavailable: "60s", failures: 3},
		{opt: "", env: KubefedTimingsTuned, period: "5s", unavailable: "10s", failures: 2},
		{opt: KubefedTimingsDefault, env: KubefedTimingsTuned, period: "10s", unavailable: "60s", failures: 3},
		{opt: "fast", wantErr: true},
	} {
		t.Run(tc.opt+"/"+tc.env, func(t *testing.T) {
			t.Setenv(KubefedTimingsEnv, tc.env)
			o := Options{Dir: t.TempDir(), KubefedTimings: tc.opt}
			err := o.defaults()
			if tc.wantErr {
				if err == nil {
					t.Fatalf("timings %q accepted", tc.opt)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			timings, err := kubefedTimingsFor(o.KubefedTimings)
			if err != nil {
				t.Fatal(err)
			}
			u := kubeFedConfig(timings)
			period, _, _ := unstructured.NestedString(u.Object, "spec", "clusterHealthCheck", "period")
			failures, _, _ := unstructured.NestedInt64(u.Object, "spec", "clusterHealthCheck", "failureThreshold")
			unavailable, _, _ := unstructured.NestedString(u.Object, "spec", "controllerDuration", "unavailableDelay")
			if period != tc.period || failures != tc.failures || unavailable != tc.unavailable {
				t.Errorf("health check every %s x %d, unavailableDelay %s; want %s x %d, %s",
					period, failures, unavailable, tc.period, tc.failures, tc.unavailable)
			}
		})
	}
}
