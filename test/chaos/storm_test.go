package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

var stormTopology = Topology{Nodes: map[string][]string{
	"member1": {"member1-node-0", "member1-node-1", "member1-node-2"},
	"member2": {"member2-node-0", "member2-node-1", "member2-node-2"},
}}

// stormSample reads member1 with the given nodes not Ready (the others
// Ready); readable says whether member1 answered.
func stormSample(s float64, readable bool, notReady ...string) Sample {
	out := Sample{Time: at(s), Readable: map[string]bool{"member1": readable, "member2": true}, Nodes: map[string]NodeSample{}}
	if !readable {
		return out
	}
	for _, n := range stormTopology.Nodes["member1"] {
		out.Nodes[n] = NodeSample{Cluster: "member1", Ready: !slices.Contains(notReady, n)}
	}
	return out
}

// TestStormSeenByTheCheckerMovesI4sBound: nodes of one member not Ready
// for notReadyFor, more than maxUnhealthy allows, are a storm, and I4's
// bound moves to its cooldown's end; fewer nodes, shorter, or a member the
// checker could not read move nothing.
func TestStormSeenByTheCheckerMovesI4sBound(t *testing.T) {
	nodes := stormTopology.Nodes["member1"]
	recovery := &v1alpha1.NodeRecoverySpec{NotReadyFor: "10s", StormCooldown: "5m", MaxUnhealthy: ptrTo(intstr.FromInt32(1))}
	cases := []struct {
		name    string
		samples []Sample
		want    time.Time // zero: no storm
	}{
		{"all lost for notReadyFor", []Sample{stormSample(0, true, nodes...), stormSample(10, true, nodes...), stormSample(12, true, nodes...), stormSample(13, true)}, at(12).Add(5 * time.Minute)},
		{"not Ready for less than notReadyFor", []Sample{stormSample(0, true, nodes...), stormSample(9, true, nodes...), stormSample(10, true)}, time.Time{}},
		{"as many as maxUnhealthy allows", []Sample{stormSample(0, true, nodes[0]), stormSample(30, true, nodes[0])}, time.Time{}},
		{"a Ready sample restarts the count", []Sample{stormSample(0, true, nodes...), stormSample(5, true), stormSample(6, true, nodes...), stormSample(15, true, nodes...)}, time.Time{}},
		{"member not readable", []Sample{stormSample(0, true, nodes...), stormSample(20, false)}, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChecker(NewTruth(t0, stormTopology), DefaultBounds(), nil)
			c.WatchStorms(recovery, stormTopology)
			for _, s := range tc.samples {
				c.Sample(s)
			}
			got, what := c.StormHeld()
			if !got.Equal(tc.want) {
				t.Fatalf("held until %v (%q), want %v", got, what, tc.want)
			}
			if !tc.want.IsZero() && !strings.Contains(what, "member1") {
				t.Fatalf("what was seen %q does not name member1", what)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
