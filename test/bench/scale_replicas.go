package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
)

// Several manager replicas (--replicas above 1): they run sharded, each
// member held by one replica (--shard), and the leader rebalances with
// every replica's member summaries (--sharded-rebalance). Every figure of
// the manager is then per replica: the memory target is each replica's
// (the largest is the table's), CPU and requests are the replicas' sums,
// and each decision says whether the leader or another replica held the
// member it was taken on.

// scLeaderElectionID is the manager's leader election Lease
// (leader_election_master_status's name label).
const scLeaderElectionID = "fedfailover.failover.fedfailover.io"

// scReplica is one manager replica's figures.
type scReplica struct {
	Name             string   `json:"name"`
	Leader           bool     `json:"leader"`
	Members          []string `json:"members_held"`
	RSSAfterSyncMB   float64  `json:"rss_after_sync_mb"`
	HeapAfterSyncMB  float64  `json:"heap_inuse_after_sync_mb"`
	RSSAfterSteadyMB float64  `json:"rss_after_steady_mb"`
	HeapAfterSteady  float64  `json:"heap_inuse_after_steady_mb"`
	PeakRSSMB        float64  `json:"peak_rss_mb"`
	CPUPercent       float64  `json:"cpu_percent_of_one_core"`
}

// Holder roles of a decision's member.
const (
	scHeldByLeader    = "leader"
	scHeldByNonLeader = "non-leader"
)

// scManagers are the replicas under measurement.
type scManagers []*scManager

func (ms scManagers) stop(b *scBench) {
	for _, m := range ms {
		if err := m.p.Stop(scStopGrace); err != nil {
			b.progress("stopping %s: %v", m.name, err)
		}
	}
}

// tag names a replica's profiles: what alone with one replica.
func (ms scManagers) tag(m *scManager, what string) string {
	if len(ms) < 2 {
		return what
	}
	return m.name + "-" + what
}

// exited returns the first replica that exited, with why.
func (ms scManagers) exited() error {
	for _, m := range ms {
		if done, err := m.p.Exited(); done {
			return fmt.Errorf("%s exited: %w", m.name, err)
		}
	}
	return nil
}

// sampleRSS samples every replica's RSS, keeps each one's peak, and
// returns the largest.
func (ms scManagers) sampleRSS() float64 {
	largest := 0.0
	for _, m := range ms {
		u, err := m.p.Sample()
		if err != nil {
			continue
		}
		v := mb(float64(u.RSS))
		m.peak = math.Max(m.peak, v)
		largest = math.Max(largest, v)
	}
	return largest
}

// scrapeAll reads every replica's metrics.
func (ms scManagers) scrapeAll(ctx context.Context) ([]string, error) {
	out := make([]string, len(ms))
	for i, m := range ms {
		text, err := m.scrape(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.name, err)
		}
		out[i] = text
	}
	return out, nil
}

// connectedAll counts the members connected over all replicas; sharded,
// it also says whether every replica sees all the others (a member is
// then held by exactly one).
func (ms scManagers) connectedAll(texts []string) (int, string) {
	n, why := 0, ""
	for i, text := range texts {
		n += connected(text)
		if len(ms) > 1 {
			if peers := int(metricValue(text, "fedfailover_shard_peers")); peers != len(ms) {
				why = fmt.Sprintf("%s sees %d of %d replicas", ms[i].name, peers, len(ms))
			}
		}
	}
	return n, why
}

// heldBy reads which replica holds each member (fedfailover_member_connected
// 1) and which replica leads.
func (ms scManagers) heldBy(ctx context.Context) (holder map[string]*scManager, leader *scManager, err error) {
	texts, err := ms.scrapeAll(ctx)
	if err != nil {
		return nil, nil, err
	}
	holder, leader = ms.holders(texts)
	return holder, leader, nil
}

// holders is heldBy from scrapes already taken, one per replica.
func (ms scManagers) holders(texts []string) (holder map[string]*scManager, leader *scManager) {
	holder = map[string]*scManager{}
	for i, text := range texts {
		m := ms[i]
		if lead, _ := ParseMetric(text, "leader_election_master_status"); Sum(lead, map[string]string{"name": scLeaderElectionID}) == 1 {
			leader = m
		}
		series, _ := ParseMetric(text, "fedfailover_member_connected")
		for _, s := range series {
			if s.Value == 1 {
				holder[s.Labels["cluster"]] = m
			}
		}
	}
	return holder, leader
}

// role names whether the leader or another replica holds member; "" with
// one replica.
func (ms scManagers) role(holder map[string]*scManager, leader *scManager, member string) string {
	switch {
	case len(ms) < 2:
		return ""
	case holder[member] != nil && holder[member] == leader:
		return scHeldByLeader
	}
	return scHeldByNonLeader
}

// replicaFigures fills r.Replicas from one scrape and one RSS sample of
// each replica: after sync (steady false) or after the steady window.
func (ms scManagers) replicaFigures(ctx context.Context, r *scResult, steady bool) {
	if len(r.Replicas) != len(ms) {
		r.Replicas = make([]scReplica, len(ms))
	}
	texts := make([]string, len(ms))
	for i, m := range ms {
		texts[i], _ = m.scrape(ctx) // a replica not answering has no heap figure
	}
	holder, leader := ms.holders(texts)
	for i, m := range ms {
		rep := &r.Replicas[i]
		rep.Name, rep.Leader = m.name, m == leader
		rep.Members = nil
		for member, h := range holder {
			if h == m {
				rep.Members = append(rep.Members, member)
			}
		}
		sort.Strings(rep.Members)
		var rss float64
		if u, err := m.p.Sample(); err == nil {
			rss = mb(float64(u.RSS))
			m.peak = math.Max(m.peak, rss)
		}
		heap := mb(metricValue(texts[i], "go_memstats_heap_inuse_bytes"))
		if steady {
			rep.RSSAfterSteadyMB, rep.HeapAfterSteady = rss, heap
		} else {
			rep.RSSAfterSyncMB, rep.HeapAfterSyncMB = rss, heap
		}
		rep.PeakRSSMB = m.peak
	}
}

// peaks samples every replica once more and records each one's peak RSS.
func (ms scManagers) peaks(r *scResult) {
	ms.sampleRSS()
	for i, m := range ms {
		if i < len(r.Replicas) {
			r.Replicas[i].PeakRSSMB = m.peak
		}
	}
}

// largest is the largest of a figure over the replicas.
func largest(reps []scReplica, pick func(scReplica) float64) float64 {
	out := 0.0
	for _, r := range reps {
		out = math.Max(out, pick(r))
	}
	return out
}

// byRole splits latencies by the role of their member's holder.
func byRole(samples map[string][]float64, missing map[string]int) map[string]*scLatency {
	if len(samples) == 0 && len(missing) == 0 {
		return nil
	}
	out := map[string]*scLatency{}
	for _, role := range []string{scHeldByLeader, scHeldByNonLeader} {
		if len(samples[role]) > 0 || missing[role] > 0 {
			out[role] = latency(slices.Clone(samples[role]), missing[role])
		}
	}
	return out
}
