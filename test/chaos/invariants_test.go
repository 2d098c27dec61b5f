package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/fedfailover/fedfailover/internal/fencing"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func only(t *testing.T, c *Checker, inv string) {
	t.Helper()
	v := c.Violations()
	if len(v) != 1 || v[0].Invariant != inv {
		t.Fatalf("violations %v, want exactly one %s", v, inv)
	}
}

func none(t *testing.T, c *Checker) {
	t.Helper()
	if v := c.Violations(); len(v) != 0 {
		t.Fatalf("unexpected violations: %v", v)
	}
}

func TestI1DestructiveActsNeedADeadProcess(t *testing.T) {
	tr := NewTruth(t0, testTopology)
	tr.Open(keyEvidence+"member1-node-0", at(9)) // with its evidence
	tr.Close(keyAlive+"member1-node-0", at(10))  // powered off at +10s
	c := NewChecker(tr, DefaultBounds(), nil)
	c.Act(Act{Cluster: "member1", Time: at(40), Kind: ActTaint, Verb: "patch", Resource: "nodes", Name: "member1-node-0", Node: "member1-node-0"})
	c.Act(Act{Cluster: "member1", Time: at(41), Kind: ActPodDelete, Verb: "delete", Resource: "pods", Name: "db-0", Node: "member1-node-0"})
	c.Act(Act{Cluster: "member1", Time: at(41), Kind: ActWrite, Verb: "patch", Resource: "nodes", Name: "member1-node-1"})
	none(t, c)
	// member1-node-1 is partitioned, never powered off: alive.
	c.Act(Act{Cluster: "member1", Time: at(42), Kind: ActDetachVolume, Verb: "delete", Resource: "volumeattachments", Name: "va", Node: "member1-node-1"})
	only(t, c, I1)
	if len(c.Acts) != 3 {
		t.Fatalf("acts %v: want the three destructive ones", c.Acts)
	}
}

// Evidence-first acts against the lab's ground truth: an act sooner after
// the node's process last ran than a Lease read unchanged over the silence
// window allows, an act on a node whose Machine the lab never gave
// evidence (a power-off without evidence, evidence not yet written, or
// cleared), and any act on a living node with evidence (the kubelet wins)
// each break I1; an act on a node dead for the window, with evidence, is
// what evidence-first detection does.
func TestI1EvidenceFirstActsAgainstTruth(t *testing.T) {
	const n0, n1 = "member1-node-0", "member1-node-1"
	taint := func(node string, s float64) Act {
		return Act{Cluster: "member1", Time: at(s), Kind: ActTaint, Verb: "patch", Resource: "nodes", Name: node, Node: node}
	}
	cases := []struct {
		name  string
		truth func(tr *Truth)
		act   Act
		want  string // "" when the act is allowed, else part of the message
	}{
		{"evidence-first: dead 5s, evidence", func(tr *Truth) {
			tr.Open(keyEvidence+n0, at(10))
			tr.Close(keyAlive+n0, at(10))
		}, taint(n0, 15), ""},
		{"within the silence window", func(tr *Truth) {
			tr.Open(keyEvidence+n0, at(10))
			tr.Close(keyAlive+n0, at(10))
		}, taint(n0, 13), "less than 4s after the node's kwok process last ran"},
		{"power-off without evidence", func(tr *Truth) {
			tr.Close(keyAlive+n0, at(10))
		}, taint(n0, 40), "no power-off evidence"},
		{"NotReady path before the late evidence", func(tr *Truth) {
			tr.Close(keyAlive+n0, at(10))
			tr.Open(keyEvidence+n0, at(45))
		}, taint(n0, 40), "no power-off evidence"},
		{"NotReady path after the late evidence", func(tr *Truth) {
			tr.Close(keyAlive+n0, at(10))
			tr.Open(keyEvidence+n0, at(45))
		}, taint(n0, 46), ""},
		{"evidence cleared at the power-on", func(tr *Truth) {
			tr.Open(keyEvidence+n0, at(10))
			tr.Close(keyAlive+n0, at(10))
			tr.Close(keyEvidence+n0, at(30))
			tr.Open(keyAlive+n0, at(31))
		}, taint(n0, 30.5), "no power-off evidence"},
		{"evidence on a living node", func(tr *Truth) {
			tr.Open(keyEvidence+n1, at(10))
		}, Act{Cluster: "member1", Time: at(30), Kind: ActPodDelete, Verb: "delete", Resource: "pods", Namespace: "ns", Name: "db-0", Node: n1},
			"while the node's kwok process was alive"},
		// Remediation: a partitioned node is found lost by its Ready
		// condition; the fence agent kills it and reports success, and
		// fedfailover acts at once on that report.
		{"partitioned, fenced by the agent", func(tr *Truth) {
			tr.Open(keyFrozen+n1, at(10))
			tr.Close(keyAlive+n1, at(40))
			tr.Close(keyFrozen+n1, at(40))
			tr.Open(keyFenced+n1, at(40))
		}, taint(n1, 40.5), ""},
		{"partitioned, the agent failed", func(tr *Truth) {
			tr.Open(keyFrozen+n1, at(10))
		}, taint(n1, 40.5), "while the node's kwok process was alive"},
		{"partitioned, before the agent's kill returned", func(tr *Truth) {
			tr.Open(keyFrozen+n1, at(10))
			tr.Close(keyAlive+n1, at(40))
			tr.Close(keyFrozen+n1, at(40))
			tr.Open(keyFenced+n1, at(41))
		}, taint(n1, 40.5), "fence agent had not powered it off"},
		{"fenced, then powered on", func(tr *Truth) {
			tr.Open(keyFrozen+n1, at(10))
			tr.Close(keyAlive+n1, at(40))
			tr.Close(keyFrozen+n1, at(40))
			tr.Open(keyFenced+n1, at(40))
			tr.Close(keyFenced+n1, at(60))
			tr.Open(keyAlive+n1, at(61))
		}, taint(n1, 60.5), "fence agent had not powered it off"},
		// Seeds 1032 and 1038: a running node whose Lease renewals its
		// API server refused is found lost by its Ready condition; the
		// agent kills it and reports success; fedfailover acts at once.
		{"killed by the agent while running", func(tr *Truth) {
			tr.Close(keyAlive+n1, at(40))
			tr.Open(keyFenced+n1, at(40))
		}, taint(n1, 40.5), ""},
		{"killed by the agent while running, acted before its report", func(tr *Truth) {
			tr.Close(keyAlive+n1, at(40))
			tr.Open(keyFenced+n1, at(41))
		}, taint(n1, 40.5), "less than 4s after the node's kwok process last ran"},
		{"killed by the agent, powered on, acted on the old report", func(tr *Truth) {
			tr.Close(keyAlive+n1, at(40))
			tr.Open(keyFenced+n1, at(40))
			tr.Close(keyFenced+n1, at(45))
			tr.Open(keyAlive+n1, at(45))
			tr.Close(keyAlive+n1, at(46))
		}, taint(n1, 47), "less than 4s after the node's kwok process last ran"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTruth(t0, testTopology)
			tc.truth(tr)
			c := NewChecker(tr, DefaultBounds(), nil)
			c.Act(tc.act)
			if tc.want == "" {
				none(t, c)
				return
			}
			only(t, c, I1)
			if msg := c.Violations()[0].Message; !strings.Contains(msg, tc.want) {
				t.Fatalf("message %q, want it to say %q", msg, tc.want)
			}
		})
	}
}

func TestI2TaintOnReadyNode(t *testing.T) {
	tr := NewTruth(t0, testTopology)
	c := NewChecker(tr, DefaultBounds(), nil)
	tainted := func(s float64, ready bool) {
		c.Sample(Sample{Time: at(s), Nodes: map[string]NodeSample{"member1-node-0": {Cluster: "member1", Ready: ready, Tainted: true}}})
	}
	tainted(0, false)
	tainted(30, true) // Ready from +30s
	// fedfailover is cut off member1 from +40s to +80s: the clock restarts at +80s.
	tr.Open(keyCut+"member1", at(40))
	tainted(50, true)
	tainted(95, true)
	tr.Close(keyCut+"member1", at(80))
	tainted(130, true)
	none(t, c)
	tainted(141, true)
	only(t, c, I2)
	if !strings.Contains(c.Violations()[0].Message, "member1-node-0") {
		t.Fatalf("message %q names no node", c.Violations()[0].Message)
	}
}

func TestI3NeverUnderWhatKubefedAloneKeeps(t *testing.T) {
	base := map[string]map[string]int{"web/web": {"member1": 3, "member2": 3}}
	sample := func(s float64, m1, m2 int, kubefedReady2 bool) Sample {
		return Sample{Time: at(s), Readable: map[string]bool{"member1": true, "member2": true},
			Running:      map[string]map[string]int{"web/web": {"member1": m1, "member2": m2}},
			KubefedReady: map[string]bool{"member1": true, "member2": kubefedReady2}}
	}
	t.Run("member failed for kubefed: its share leaves the bound", func(t *testing.T) {
		c := NewChecker(NewTruth(t0, testTopology), DefaultBounds(), base)
		for s := 60.0; s < 200; s += 10 {
			c.Sample(sample(s, 3, 0, false))
		}
		none(t, c)
	})
	t.Run("a fedfailover-only cut must not lose replicas", func(t *testing.T) {
		tr := NewTruth(t0, testTopology)
		tr.Open(keyCut+"member2", at(60)) // fedfailover's own view: not a capacity fault
		c := NewChecker(tr, DefaultBounds(), base)
		c.Sample(sample(70, 3, 3, true))
		c.Sample(sample(80, 3, 1, true))
		c.Sample(sample(100, 3, 1, true))
		none(t, c)
		c.Sample(sample(111, 3, 1, true))
		only(t, c, I3)
	})
	t.Run("a capacity fault on the member: settles before it counts", func(t *testing.T) {
		tr := NewTruth(t0, testTopology)
		tr.Open(keyFault+"member2", at(60))
		tr.Close(keyFault+"member2", at(100))
		c := NewChecker(tr, DefaultBounds(), base)
		for s := 70.0; s <= 160; s += 10 {
			c.Sample(sample(s, 3, 0, true))
		}
		none(t, c)
		for s := 170.0; s <= 200; s += 10 {
			c.Sample(sample(s, 3, 0, true))
		}
		only(t, c, I3)
	})
	t.Run("replicas moved to another member count", func(t *testing.T) {
		c := NewChecker(NewTruth(t0, testTopology), DefaultBounds(), base)
		for s := 60.0; s < 200; s += 10 {
			c.Sample(sample(s, 6, 0, true))
		}
		none(t, c)
	})
	t.Run("an unreadable member is not judged as zero", func(t *testing.T) {
		c := NewChecker(NewTruth(t0, testTopology), DefaultBounds(), base)
		for s := 60.0; s < 200; s += 10 {
			smp := sample(s, 3, 0, true)
			smp.Readable["member2"] = false
			c.Sample(smp)
		}
		none(t, c)
	})
}

func TestI5WriteRate(t *testing.T) {
	b := DefaultBounds()
	b.WritesPerMember, b.WritesPerRSP = 5, 2
	c := NewChecker(NewTruth(t0, testTopology), b, nil)
	for i := range 5 { // 5 writes per 20 s: 3 in any 60 s... plus spread
		c.Act(Act{Cluster: "member1", Time: at(float64(i) * 20), Kind: ActWrite, Resource: "events"})
	}
	c.Act(Act{Cluster: hostCluster, Time: at(1), Kind: ActWrite, Resource: "replicaschedulingpreferences", Namespace: "web", Name: "web"})
	c.Act(Act{Cluster: hostCluster, Time: at(50), Kind: ActWrite, Resource: "replicaschedulingpreferences", Namespace: "web", Name: "web"})
	c.Act(Act{Cluster: hostCluster, Time: at(2), Kind: ActWrite, Resource: "noderecoveries", Name: "x"})
	none(t, c)
	c.Act(Act{Cluster: hostCluster, Time: at(55), Kind: ActWrite, Resource: "replicaschedulingpreferences", Namespace: "web", Name: "web"})
	only(t, c, I5)
	if c.Writes["rsp/web/web"] != 3 || c.Writes["member/member1"] != 5 || c.Writes["host"] != 1 {
		t.Fatalf("write counts %v", c.Writes)
	}
}

// I3's other half: replicas moved off a member kubefed sees Ready and no
// capacity fault touched (a fedfailover-only cut, say) are a violation,
// even while the total still runs elsewhere; a failback's steps and a
// shift during a fault are not.
func TestI3NoReplicasMovedOffAHealthyMember(t *testing.T) {
	base := map[string]map[string]int{"web/web": {"member1": 3, "member2": 3}}
	sample := func(s float64, pins map[string]int, kubefedReady2 bool) Sample {
		return Sample{Time: at(s), Readable: map[string]bool{"member1": true, "member2": true},
			Running:      map[string]map[string]int{"web/web": {"member1": 6, "member2": 0}},
			KubefedReady: map[string]bool{"member1": true, "member2": kubefedReady2},
			Pins:         map[string]map[string]int{"web/web": pins}}
	}
	t.Run("shift off a member cut from fedfailover alone", func(t *testing.T) {
		tr := NewTruth(t0, testTopology)
		tr.Open(keyCut+"member2", at(90))
		c := NewChecker(tr, DefaultBounds(), base)
		c.Sample(sample(100, map[string]int{}, true))
		none(t, c)
		c.Sample(sample(110, map[string]int{"member1": 6, "member2": 0}, true))
		only(t, c, I3)
		if !strings.Contains(c.Violations()[0].Message, "moved off member2") {
			t.Errorf("message %q does not say replicas moved off member2", c.Violations()[0].Message)
		}
	})
	t.Run("shift while kubefed reports the member not Ready", func(t *testing.T) {
		c := NewChecker(NewTruth(t0, testTopology), DefaultBounds(), base)
		c.Sample(sample(100, map[string]int{}, false))
		c.Sample(sample(110, map[string]int{"member1": 6, "member2": 0}, false))
		none(t, c)
	})
	t.Run("shift during a capacity fault, then failback steps", func(t *testing.T) {
		tr := NewTruth(t0, testTopology)
		tr.Open(keyFault+"member2", at(100))
		c := NewChecker(tr, DefaultBounds(), base)
		c.Sample(sample(105, map[string]int{}, true))
		c.Sample(sample(110, map[string]int{"member1": 6, "member2": 0}, true))
		tr.Close(keyFault+"member2", at(120))
		for i, p2 := range []int{0, 2, 2, 3} {
			c.Sample(sample(200+10*float64(i), map[string]int{"member1": 6 - p2, "member2": p2}, true))
		}
		none(t, c)
	})
}

// A member's kube-scheduler that lost track of a pod says so in its log;
// the campaign names that fault (and restarts that scheduler) instead of
// carrying it into every later run.
func TestCorruptionLinesFindTheSchedulersOwnMessage(t *testing.T) {
	log := `I1205 03:36:59.000000   14944 schedule_one.go:1] "Successfully bound pod to node" pod="chaos-db/db-0"
E1205 03:37:20.785874   14944 cache.go:662] "Pod updated on a different node than previously added to. Scheduler cache is corrupted and can badly affect scheduling decisions" pod="chaos-db/db-0"
E1205 03:38:00.142539   14944 configmap_cafile_content.go:246] "Unhandled Error" err="missing content for CA bundle"`
	got := corruptionLines(log)
	if len(got) != 1 || !strings.Contains(got[0], "chaos-db/db-0") {
		t.Fatalf("corruption lines %q, want the one cache.go line", got)
	}
	if n := len(corruptionLines("I1205 all fine\n")); n != 0 {
		t.Fatalf("%d corruption lines in a healthy log", n)
	}
}

// I1's silence bound is the silence window fedfailover waits out on the
// lab's kwok Lease (8 s, lab.Options' default NodeLeaseSeconds, which the
// campaign keeps) less 1 s for the truth, which closes a process's life
// only once its power-off has returned: a bound above the window would
// flag acts that are right, one far below it would miss acts on a Lease
// read before the kubelet stopped.
func TestKubeletSilenceBoundFollowsTheLeaseWindow(t *testing.T) {
	window := fencing.SilenceWindow(8 * time.Second)
	if got, want := DefaultBounds().KubeletSilence, window-time.Second; got != want {
		t.Fatalf("KubeletSilence %s, want the lab's silence window %s less 1 s: %s", got, window, want)
	}
}
