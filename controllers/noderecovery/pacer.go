package noderecovery

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Force-deletion rounds of one recovery are paced.
//
// The first round (the pods found on the node when it is fenced) goes at
// once. A later round finds pods bound to the fenced node since: a member
// whose scheduler does not see the node's taints yet (its cache behind
// after its API server restarted) binds every replacement onto the node
// again, and deleting each at once is a hot loop of writes that moves
// nothing, since the next replacement lands there too. So each later round
// waits twice as long after the one before, from 1 s up to a minute. This
// never makes things worse than the member alone: with the out-of-service
// taint, its taint eviction and pod GC delete such pods anyway; without it,
// a replacement that went astray is deleted at most a minute late.
const (
	paceFirst = time.Second
	paceMax   = time.Minute
)

// pacer remembers, per recovery, the force-deletion rounds this process
// made and when the last one was. Process memory is enough: it only holds
// writes back, never allows one (a restart starts over at the first round).
type pacer struct {
	mu     sync.Mutex
	rounds map[paceKey]paced
}

// paceKey is one recovery: a node of a member under one record.
type paceKey struct {
	cluster, node string
	record        types.UID
}

type paced struct {
	rounds int
	last   time.Time
}

// wait is how long the next round of k must wait from now (0: it may go),
// and the number of rounds made so far.
func (p *pacer) wait(k paceKey, now time.Time) (time.Duration, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.rounds[k]
	if !ok || s.rounds == 0 {
		return 0, 0
	}
	gap := min(paceFirst<<min(s.rounds-1, 16), paceMax)
	return max(s.last.Add(gap).Sub(now), 0), s.rounds
}

// deleted records a round of k that deleted at least one pod.
func (p *pacer) deleted(k paceKey, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rounds == nil {
		p.rounds = map[paceKey]paced{}
	}
	s := p.rounds[k]
	p.rounds[k] = paced{rounds: s.rounds + 1, last: now}
}

// forget drops every recovery of the node (its record closed).
func (p *pacer) forget(cluster, node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.rounds {
		if k.cluster == cluster && k.node == node {
			delete(p.rounds, k)
		}
	}
}
