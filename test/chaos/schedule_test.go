package chaos

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var testTopology = Topology{Nodes: map[string][]string{
	"member1": {"member1-node-0", "member1-node-1"},
	"member2": {"member2-node-0", "member2-node-1"},
}}

var testParams = Params{Window: time.Minute, Faults: 12, MinHold: 5 * time.Second, MaxHold: 30 * time.Second, LossMaxHold: 60 * time.Second}

// maxHold is the longest hold the parameters allow a kind.
func maxHold(p Params, k Kind) time.Duration {
	if k.loss() {
		return p.LossMaxHold
	}
	return p.MaxHold
}

// Node losses spread over their own longer range; every other kind keeps
// the hold it has without it, from the same draw (so the random sequence,
// and the rest of a seed's schedule, does not depend on LossMaxHold).
func TestLossHoldsSpreadLonger(t *testing.T) {
	span := testParams.MaxHold - testParams.MinHold
	short := testParams
	short.LossMaxHold = 0
	for _, k := range Kinds {
		for _, u := range []time.Duration{0, span / 3, span} {
			got, without := testParams.hold(k, u), short.hold(k, u)
			switch {
			case !k.loss() && got != without:
				t.Errorf("%s: hold %s with LossMaxHold, %s without", k, got, without)
			case u == span && got != maxHold(testParams, k):
				t.Errorf("%s: longest hold %s, want %s", k, got, maxHold(testParams, k))
			case u == 0 && got != testParams.MinHold:
				t.Errorf("%s: shortest hold %s, want %s", k, got, testParams.MinHold)
			}
		}
	}
	long := 0
	for seed := range uint64(200) {
		for _, f := range Draw(seed, testTopology, testParams) {
			if f.Kind.loss() && f.Hold > testParams.MaxHold {
				long++
			}
		}
	}
	if long == 0 {
		t.Fatal("no node loss held longer than MaxHold in 200 seeds")
	}
}

func TestDrawReplaysASeed(t *testing.T) {
	a, b := Draw(42, testTopology, testParams), Draw(42, testTopology, testParams)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("the same seed drew two schedules:\n%v\n%v", a, b)
	}
	if reflect.DeepEqual(a, Draw(43, testTopology, testParams)) {
		t.Fatal("seeds 42 and 43 drew the same schedule")
	}
}

func TestDrawKeepsOneFaultPerTarget(t *testing.T) {
	for seed := range uint64(200) {
		s := Draw(seed, testTopology, testParams)
		if len(s) == 0 {
			t.Fatalf("seed %d: empty schedule", seed)
		}
		for i, f := range s {
			if f.At < 0 || f.At >= testParams.Window || f.Hold < testParams.MinHold || f.Hold > maxHold(testParams, f.Kind) {
				t.Fatalf("seed %d: fault %v outside the parameters", seed, f)
			}
			if i > 0 && s[i-1].At > f.At {
				t.Fatalf("seed %d: not sorted: %v", seed, s)
			}
			for _, g := range s[:i] {
				if sameTarget(f, g) && f.At < g.At+g.Hold {
					t.Fatalf("seed %d: %v overlaps %v on one target", seed, g, f)
				}
			}
		}
	}
}

// Over many seeds every kind, evidence and edit is drawn.
func TestDrawCoversEveryKind(t *testing.T) {
	seen := map[string]bool{}
	for seed := range uint64(200) {
		for _, f := range Draw(seed, testTopology, testParams) {
			seen[string(f.Kind)] = true
			seen["evidence/"+f.Evidence] = true
			seen["detection/"+f.Detection] = true
			seen["edit/"+f.Edit] = true
			seen["mode/"+f.Mode] = true
		}
	}
	for _, m := range stateModes {
		if !seen["mode/"+m] {
			t.Errorf("rebalance state fault %s never drawn", m)
		}
	}
	for _, k := range Kinds {
		if !seen[string(k)] {
			t.Errorf("kind %s never drawn", k)
		}
	}
	for _, e := range evidences {
		if !seen["evidence/"+e] {
			t.Errorf("evidence %s never drawn", e)
		}
	}
	for _, e := range edits {
		if !seen["edit/"+e] {
			t.Errorf("edit %s never drawn", e)
		}
	}
	for _, d := range detections {
		if !seen["detection/"+d] {
			t.Errorf("detection %s never drawn", d)
		}
	}
}

// A power-off with evidence is found lost by that evidence (written with
// the power-off) or by its Ready condition (the evidence written once the
// member and notReadyFor have made it lost); one without evidence has no
// detection to draw. Evidence on a living node is always real evidence.
func TestDrawEvidenceVariants(t *testing.T) {
	counts := map[string]int{}
	for seed := range uint64(300) {
		for _, f := range Draw(seed, testTopology, testParams) {
			switch f.Kind {
			case PowerOff:
				switch {
				case f.Evidence == "none" && (f.Detection != "" || f.EvidenceAfter != 0):
					t.Fatalf("seed %d: %v: a power-off without evidence has no detection", seed, f)
				case f.Evidence != "none" && f.Detection == DetectEvidence && f.EvidenceAfter != 0:
					t.Fatalf("seed %d: %v: evidence-first evidence comes with the power-off", seed, f)
				case f.Evidence != "none" && f.Detection == DetectNotReady && f.EvidenceAfter != lateEvidence:
					t.Fatalf("seed %d: %v: want the evidence %s after the power-off", seed, f, lateEvidence)
				case f.Evidence != "none" && f.Detection != DetectEvidence && f.Detection != DetectNotReady:
					t.Fatalf("seed %d: %v: detection %q", seed, f, f.Detection)
				}
				counts["power-off/"+f.Detection]++
			case EvidenceAlive:
				if f.Evidence == "none" || f.Evidence == "" || f.Detection != "" || f.Node == "" {
					t.Fatalf("seed %d: %v: want a node and real evidence, no detection", seed, f)
				}
				counts["evidence-alive/"+f.Evidence]++
			case Partition:
				if !slices.Contains(remediations, f.Remediation) {
					t.Fatalf("seed %d: %v: remediation outcome %q", seed, f, f.Remediation)
				}
				counts["partition/"+f.Remediation]++
			default:
				if f.Detection != "" || f.EvidenceAfter != 0 || f.Remediation != "" {
					t.Fatalf("seed %d: %v: only power-offs have a detection, only partitions a remediation", seed, f)
				}
			}
		}
	}
	for _, k := range []string{"power-off/", "power-off/" + DetectEvidence, "power-off/" + DetectNotReady,
		"evidence-alive/machine-deleted", "evidence-alive/powered-off-condition",
		"partition/" + RemediatePowerOff, "partition/" + RemediateFail, "partition/" + RemediateSlow} {
		if counts[k] == 0 {
			t.Errorf("%s never drawn in 300 seeds (%v)", k, counts)
		}
	}
}

// The NotReady variant's evidence comes after the lab's member has marked
// the node NotReady (16-21 s after its last renewal) and the live policy's
// notReadyFor (10 s) has passed.
func TestLateEvidenceFollowsTheNotReadyPath(t *testing.T) {
	if lateEvidence <= 21*time.Second+10*time.Second {
		t.Fatalf("late evidence after %s: the NotReady path may not have found the node lost yet", lateEvidence)
	}
	if !strings.Contains(livePolicyYAML, "notReadyFor: 10s") {
		t.Fatal("the live policy's notReadyFor changed: review lateEvidence")
	}
}

// A slow remediation outlasts the live policy's timeout, so fedfailover
// gives up before the agent powers the node off; a quick one does not.
func TestRemediationOutcomesAgainstThePolicysTimeout(t *testing.T) {
	if remediationTimeout != 30*time.Second || !strings.Contains(livePolicyYAML, "timeout: 30s") {
		t.Fatalf("the live policy's remediation timeout is not remediationTimeout (%s):\n%s", remediationTimeout, livePolicyYAML)
	}
	if slowRemediationDelay <= remediationTimeout || remediationDelay >= remediationTimeout {
		t.Fatalf("delays %s and %s against the timeout %s", remediationDelay, slowRemediationDelay, remediationTimeout)
	}
	if !strings.Contains(livePolicyYAML, "namespace: "+fenceNamespace+", name: "+fenceTemplate) {
		t.Fatalf("the live policy does not name the fence agent's template %s/%s", fenceNamespace, fenceTemplate)
	}
}

func sameTarget(a, b Fault) bool {
	group := func(f Fault) string {
		switch f.Kind {
		case PowerOff, Replace, Partition, ForgedMarks, EvidenceAlive:
			return "node/" + f.Node
		case APIKill, EtcdStop:
			return "cp/" + f.Cluster
		case ManagerKill, ManagerKillMidAction:
			return "manager"
		case PolicyEdit:
			return "policy"
		}
		return string(f.Kind) + "/" + f.Cluster
	}
	return group(a) == group(b)
}

// The report counts losses per variant: evidence-first ones apart from
// those that reach fedfailover through the NotReady path, and those
// without evidence.
func TestFaultVariants(t *testing.T) {
	cases := map[string]Fault{
		"power-off machine-deleted evidence-first":        {Kind: PowerOff, Evidence: "machine-deleted", Detection: DetectEvidence},
		"power-off powered-off-condition not-ready-first": {Kind: PowerOff, Evidence: "powered-off-condition", Detection: DetectNotReady, EvidenceAfter: lateEvidence},
		"power-off none":                 {Kind: PowerOff, Evidence: "none"},
		"evidence-alive machine-deleted": {Kind: EvidenceAlive, Evidence: "machine-deleted"},
		"partition remediation slow":     {Kind: Partition, Remediation: RemediateSlow},
		"":                               {Kind: Capacity, Mode: "cordon"},
	}
	for want, f := range cases {
		if got := f.Variant(); got != want {
			t.Errorf("%v: variant %q, want %q", f, got, want)
		}
	}
	r := &Report{Faults: map[Kind]int{}, Violations: map[string]int{}}
	r.add(&RunResult{Timeline: []Applied{
		{Fault: cases["power-off none"], Started: time.Now()},
		{Fault: cases["power-off machine-deleted evidence-first"], Started: time.Now()},
		{Fault: cases["power-off machine-deleted evidence-first"], Started: time.Now()},
		{Fault: cases[""], Started: time.Now()},
		{Fault: cases["evidence-alive machine-deleted"], Error: "not injected"},
	}})
	want := map[string]int{"power-off none": 1, "power-off machine-deleted evidence-first": 2}
	if !reflect.DeepEqual(r.Variants, want) {
		t.Fatalf("variants %v, want %v", r.Variants, want)
	}
	var out strings.Builder
	if err := r.Print(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "power-off machine-deleted evidence-first") {
		t.Fatalf("the report does not list the variants:\n%s", out.String())
	}
}
