//go:build e2e

package sharding

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/test/lab"
)

// TestShardingAcrossManagerProcesses runs three manager processes with
// --shard over four members: each member is owned (connected, Lease held)
// by exactly one of them. Then a node of a member owned by one replica is
// powered off, and that replica is killed -9 while the recovery is
// pending (recorded and blocked for want of evidence, which comes right
// after the kill): the survivors take its members over once their Leases
// expire, and the new owner finishes the recovery from the host-side
// record. Never are two replicas connected
// to a member at once, nor write to one in the same lease term.
func TestShardingAcrossManagerProcesses(t *testing.T) {
	f := newFixture(t)
	const appNS = "shard-kill"
	var replicas []*replica
	for i := range 3 {
		replicas = append(replicas, f.startReplica(fmt.Sprintf("replica-%d", i), nil))
	}
	watchConnections(t, replicas)
	f.createPolicy("shard-kill", "1s")
	f.createDB(appNS)

	started := time.Now()
	settled(t, replicas, f.members)
	t.Logf("%d members connected, each by one replica, %s after the start", len(f.members), time.Since(started).Round(100*time.Millisecond))
	f.ownedAsConnected(replicas)

	victim := replicas[0]
	for _, r := range replicas {
		if len(r.connected()) > len(victim.connected()) {
			victim = r
		}
	}
	victimID, moved := victim.identity(), victim.connected()
	member := moved[0]
	pod := f.dbPod(member, appNS, "", 90*time.Second)
	node := pod.Spec.NodeName
	// Powered off without evidence yet: the owner records the loss and
	// blocks it (nothing proves the node off), so the recovery is pending
	// in its host-side record when the owner dies; the evidence (Machine
	// deleted) comes right after the kill.
	f.powerOff(member, node, lab.EvidenceNone)
	poweredOff := time.Now()
	var rec *v1alpha1.NodeRecovery
	poll(t, 60*time.Second, 200*time.Millisecond, "the NodeRecovery record of "+node+" Blocked", func(ctx context.Context) (bool, string) {
		var err error
		if rec, err = f.record(ctx, member, node); err != nil {
			return false, err.Error()
		}
		return rec != nil && rec.Status.Phase == v1alpha1.RecoveryPhaseBlocked, describe(rec)
	})
	if rec.Status.IntentAt != nil {
		t.Fatalf("the recovery of %s was acted on before the kill, not pending: %s", node, describe(rec))
	}
	if err := victim.proc.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := theLab.PowerOff(t.Context(), node, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	t.Logf("kill -9 %s (%s, owner of %v) %s after the power-off of %s/%s, its recovery pending: %s",
		victim.name, victimID, moved, killed.Sub(poweredOff).Round(100*time.Millisecond), member, node, describe(rec))
	var survivors []*replica
	for _, r := range replicas {
		if r != victim {
			survivors = append(survivors, r)
		}
	}

	var newOwner string
	took := poll(t, handover, 200*time.Millisecond, "the killed replica's member Leases taken over", func(ctx context.Context) (bool, string) {
		hs, err := f.holders(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range moved {
			if h := hs[m]; h == victimID || h == "" {
				return false, fmt.Sprintf("%s still held by %q", m, h)
			}
		}
		newOwner = hs[member]
		return true, ""
	})
	t.Logf("Leases of %v taken over %s after kill -9; %s now held by %s", moved, took.Round(100*time.Millisecond), member, newOwner)
	settled(t, survivors, f.members)
	t.Logf("every member connected again %s after kill -9", time.Since(killed).Round(100*time.Millisecond))
	f.ownedAsConnected(survivors)

	// The new owner finishes the recovery: taint, replacement elsewhere,
	// the record Recovered.
	cl := theLab.MustClient(member)
	poll(t, 90*time.Second, 500*time.Millisecond, node+" tainted out-of-service", func(ctx context.Context) (bool, string) {
		n := &corev1.Node{}
		if err := cl.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return false, err.Error()
		}
		return oosTainted(n), "Ready=" + string(lab.NodeReadyStatus(n))
	})
	replacement := f.dbPod(member, appNS, node, 90*time.Second)
	poll(t, time.Minute, 500*time.Millisecond, "the record of "+node+" Recovered", func(ctx context.Context) (bool, string) {
		var err error
		if rec, err = f.record(ctx, member, node); err != nil {
			return false, err.Error()
		}
		return rec != nil && rec.Status.Phase == v1alpha1.RecoveryPhaseRecovered && rec.Status.RecoveredAt != nil, describe(rec)
	})
	if rec.Status.Method != v1alpha1.RecoveryMethodOutOfServiceTaint || rec.Status.Evidence != "MachineInfrastructureDeleted" ||
		rec.Status.IntentAt == nil || rec.Status.IntentAt.Time.Before(killed.Truncate(time.Second)) {
		t.Errorf("record after the takeover: %s, want the taint decided after the kill on MachineInfrastructureDeleted", describe(rec))
	}
	t.Logf("recovery finished by the new owner %s after kill -9: %s Running on %s; %s",
		time.Since(killed).Round(100*time.Millisecond), replacement.Name, replacement.Spec.NodeName, describe(rec))

	// From the audit logs: the invariant, the takeovers waited a lease
	// duration after the victim's last renewal, and the node's writes after
	// the kill (the taint at least) are the new owner's.
	terms, writes := f.checkTerms()
	for _, m := range moved {
		tm, ok := termAt(terms, m, victimID, killed)
		if !ok || tm.To.IsZero() {
			t.Errorf("%s: no term of %s at the kill ended by a takeover (terms %v)", m, victimID, terms)
			continue
		}
		if gap := tm.To.Sub(tm.Last); gap < shardLease || tm.To.Sub(killed) > handover {
			t.Errorf("%s taken over %s after the victim's last renewal and %s after the kill; want at least %s, and at most %s after the kill",
				m, gap, tm.To.Sub(killed), shardLease, handover)
		}
		t.Logf("%s: last renewal by the victim %s before the kill, taken over %s after it",
			m, killed.Sub(tm.Last).Round(time.Millisecond), tm.To.Sub(killed).Round(time.Millisecond))
	}
	nodeWrites := 0
	for _, w := range writes {
		if w.Member == member && w.At.After(killed) && strings.HasSuffix(w.What, "nodes "+node) {
			nodeWrites++
			if w.Writer != newOwner {
				t.Errorf("after the kill %s wrote %s, want only the new owner %s", w.Writer, w.What, newOwner)
			}
		}
	}
	if nodeWrites == 0 {
		t.Errorf("no write to node %s after the kill in %s's audit log: who tainted it?", node, member)
	}
}

// TestShardReplicaCutFromHostStopsBeforeTakeover runs a replica in its own
// network namespace, reaching the host API server and the members through
// forwarders, next to two others. It recovers a lost node of a member it
// owns; then its host forwarder is cut (its member forwarders stay) and the
// node is powered on again, so removing the taint is the member owner's
// next write. The cut replica must drop its holds (its metrics) and make
// its last write to each member (the members' audit logs) before another
// replica acquires that member's Lease (the host's audit log), and keep
// running.
func TestShardReplicaCutFromHostStopsBeforeTakeover(t *testing.T) {
	f := newFixture(t)
	const appNS = "shard-cut"
	replicas := []*replica{f.startReplica("replica-0", nil), f.startReplica("replica-1", nil)}
	f.createPolicy("shard-cut", "1s")
	f.createDB(appNS)
	// Cut from the host, the leader would exit (leader election lost)
	// rather than keep running without its holds: the isolated replica
	// starts once one of the others leads.
	poll(t, time.Minute, 500*time.Millisecond, "a leader among the first two replicas", func(ctx context.Context) (bool, string) {
		l := &coordinationv1.Lease{}
		if err := f.host.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: leaderElectionID}, l); err != nil {
			return false, err.Error()
		}
		return ptr.Deref(l.Spec.HolderIdentity, "") != "", "no holder"
	})
	iso, err := lab.NewIsolation("fedfailover-shard")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := iso.Close(); err != nil {
			t.Errorf("isolation: %v", err)
		}
	})
	for _, c := range f.st.Clusters {
		if err := iso.Forward(f.addr(c.Name)); err != nil {
			t.Fatal(err)
		}
	}
	// Identities are random: a replica owning none of the four members
	// (one start in five) is started again as a new peer.
	var cut *replica
	for attempt := 1; ; attempt++ {
		cut = f.startReplica("isolated", iso)
		settled(t, append(slices.Clone(replicas), cut), f.members)
		if len(cut.connected()) > 0 {
			break
		}
		if attempt == 5 {
			t.Fatal("the isolated replica owned no member in 5 starts")
		}
		t.Logf("the isolated replica owns no member: starting it again")
		if err := cut.proc.Stop(20 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	replicas = append(replicas, cut)
	watchConnections(t, replicas)
	f.ownedAsConnected(replicas)
	cutID, owned := cut.identity(), cut.connected()
	member := owned[0]

	// The isolated replica recovers a node of its member: its writes.
	pod := f.dbPod(member, appNS, "", 90*time.Second)
	node := pod.Spec.NodeName
	f.powerOff(member, node, lab.EvidenceMachineDeleted)
	poll(t, 90*time.Second, 500*time.Millisecond, "the record of "+node+" Recovered", func(ctx context.Context) (bool, string) {
		rec, err := f.record(ctx, member, node)
		if err != nil {
			return false, err.Error()
		}
		return rec != nil && rec.Status.Phase == v1alpha1.RecoveryPhaseRecovered, describe(rec)
	})

	before, err := cut.scrape()
	if err != nil {
		t.Fatal(err)
	}
	cutAt := time.Now()
	iso.Cut(f.addr(lab.HostName))
	// Powered on while the holds run out: the taint's removal is due
	// around the drop. Restore takes its time; the drop is timed meanwhile.
	restored := make(chan error, 1)
	go func() { restored <- theLab.Restore(context.WithoutCancel(t.Context()), node) }()
	t.Logf("cut %s (%s, owner of %v) off the host; powering %s/%s on again", cut.name, cutID, owned, member, node)
	var dropped time.Time
	poll(t, shardRenew+3*time.Second, 100*time.Millisecond, "the cut replica dropping its holds", func(context.Context) (bool, string) {
		samples, err := cut.scrape()
		if err != nil {
			return false, err.Error()
		}
		if v, ok := value(samples, "fedfailover_shard_owned_members", nil); !ok || v != 0 {
			return false, fmt.Sprintf("owned members %v", v)
		}
		dropped = time.Now()
		return true, ""
	})
	if err := <-restored; err != nil {
		t.Fatal(err)
	}
	samples, err := cut.scrape()
	if err != nil {
		t.Fatal(err)
	}
	// Whichever deadline passes first ends the hold: the member Lease's
	// renewals (lost) or the replica's own peer Lease's, after which it no
	// longer counts itself a live peer and hands its members over (released).
	for _, m := range owned {
		lost, released := holdEnds(before, m)
		lost2, released2 := holdEnds(samples, m)
		if lost2+released2 < lost+released+1 {
			t.Errorf("%s: no end of hold counted by the cut replica (lost %v, released %v)", m, lost2, released2)
		}
		t.Logf("%s: holds ended by the cut replica: lost %v, released %v", m, lost2-lost, released2-released)
	}
	if c := cut.connected(); len(c) != 0 {
		t.Errorf("the cut replica still connected to %v after dropping its holds", c)
	}
	t.Logf("the cut replica dropped its holds %s after the cut (seen in its metrics)", dropped.Sub(cutAt).Round(100*time.Millisecond))

	poll(t, handover, 200*time.Millisecond, "the cut replica's member Leases taken over", func(ctx context.Context) (bool, string) {
		hs, err := f.holders(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range owned {
			if h := hs[m]; h == cutID || h == "" {
				return false, fmt.Sprintf("%s still held by %q", m, h)
			}
		}
		return true, ""
	})
	t.Logf("Leases of %v taken over %s after the cut", owned, time.Since(cutAt).Round(100*time.Millisecond))
	if !cut.alive() {
		t.Fatal("the cut replica exited: it must keep running without its holds")
	}
	cl := theLab.MustClient(member)
	poll(t, time.Minute, 500*time.Millisecond, node+" Ready without the out-of-service taint", func(ctx context.Context) (bool, string) {
		n := &corev1.Node{}
		if err := cl.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return false, err.Error()
		}
		return lab.NodeReadyStatus(n) == corev1.ConditionTrue && !oosTainted(n),
			fmt.Sprintf("Ready=%s tainted=%v", lab.NodeReadyStatus(n), oosTainted(n))
	})

	terms, writes := f.checkTerms()
	for _, m := range owned {
		tm, ok := termAt(terms, m, cutID, cutAt)
		if !ok || tm.To.IsZero() {
			t.Errorf("%s: no term of the cut replica at the cut ended by a takeover (terms %v)", m, terms)
			continue
		}
		last := lastWrite(writes, m, cutID)
		if m == member && last.IsZero() {
			t.Errorf("%s: no write by the cut replica in its audit log, though it recovered %s", m, node)
		}
		if !last.Before(tm.To) || !dropped.Before(tm.To) || tm.To.Sub(tm.Last) < shardLease {
			t.Errorf("%s: last write by the cut replica %s, holds dropped %s, last renewal %s, taken over %s: want the write and the drop before the takeover, a lease duration (%s) after the renewal",
				m, last.Format(stamp), dropped.Format(stamp), tm.Last.Format(stamp), tm.To.Format(stamp), shardLease)
		}
		wrote := "none"
		if !last.IsZero() {
			wrote = tm.To.Sub(last).Round(time.Millisecond).String() + " before the takeover"
		}
		t.Logf("%s: last renewal %s before the cut; last write by the cut replica: %s; holds dropped %s before the takeover; taken over %s after the cut",
			m, cutAt.Sub(tm.Last).Round(time.Millisecond), wrote,
			tm.To.Sub(dropped).Round(time.Millisecond), tm.To.Sub(cutAt).Round(time.Millisecond))
	}
	for _, w := range writes {
		if w.Member == member && w.At.After(cutAt) && strings.HasSuffix(w.What, "nodes "+node) {
			t.Logf("after the cut %s wrote %s at +%s", w.Writer, w.What, w.At.Sub(cutAt).Round(time.Millisecond))
		}
	}
}

// holdEnds are the replica's member Lease transitions lost and released
// for member.
func holdEnds(samples []sample, member string) (lost, released float64) {
	const name = "fedfailover_shard_lease_transitions_total"
	lost, _ = value(samples, name, map[string]string{"cluster": member, "transition": "lost"})
	released, _ = value(samples, name, map[string]string{"cluster": member, "transition": "released"})
	return lost, released
}

// leaderElectionID is the manager's leader election Lease (cmd/manager).
const leaderElectionID = "fedfailover.failover.fedfailover.io"

// ownedAsConnected checks that each connected member's Lease is held by
// the replica connected to it, and that each replica's owned-members
// metric counts what it is connected to.
func (f *fixture) ownedAsConnected(replicas []*replica) {
	t := f.t
	t.Helper()
	hs, err := f.holders(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range replicas {
		id, conn := r.identity(), r.connected()
		for _, m := range conn {
			if hs[m] != id {
				t.Errorf("%s connected by %s (%s) but its Lease held by %q", m, r.name, id, hs[m])
			}
		}
		samples, err := r.scrape()
		if err != nil {
			t.Errorf("%s: %v", r.name, err)
			continue
		}
		if v, ok := value(samples, "fedfailover_shard_owned_members", nil); !ok || int(v) != len(conn) {
			t.Errorf("%s: fedfailover_shard_owned_members %v, connected to %v", r.name, v, conn)
		}
		t.Logf("%s (%s) owns %v", r.name, id, conn)
	}
}

// termAt is holder's term of member that was open at the given time.
func termAt(terms []Term, member, holder string, at time.Time) (Term, bool) {
	for _, tm := range terms {
		if tm.Member == member && tm.Holder == holder && tm.contains(at) {
			return tm, true
		}
	}
	return Term{}, false
}
