package bench

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/test/lab"
)

// The churn driver replays, at stated rates, what a real member sends the
// manager's watches while nothing fails: every node's periodic status
// report, pods replaced, and the RSP workloads scaled. Static bulk objects
// change only through it.

// churnRates are the driver's rates as given by the flags.
type churnRates struct {
	// NodeStatusEvery is how often each bulk node reports its status (the
	// kubelet's nodeStatusReportFrequency, 5 min); 0 turns it off.
	NodeStatusEvery time.Duration `json:"-"`
	// NodeStatusEverySeconds is NodeStatusEvery in the JSON.
	NodeStatusEverySeconds float64 `json:"node_status_every_seconds"`
	// PodPercentPerMin is the share of all bulk pods replaced per minute.
	PodPercentPerMin float64 `json:"pod_replaced_percent_per_minute"`
	// ScalePerMin is RSP scale events per minute (one RSP's totalReplicas
	// up by one, the next event back down).
	ScalePerMin float64 `json:"rsp_scale_events_per_minute"`
}

// churnPlan is the rates turned into the pace of each stream: one write
// (node), replacement (pod) or scale event every interval; 0 is off.
type churnPlan struct {
	Rates         churnRates    `json:"rates"`
	NodeInterval  time.Duration `json:"-"`
	PodInterval   time.Duration `json:"-"`
	ScaleInterval time.Duration `json:"-"`
	// Per second, over every member, for the report.
	NodeStatusPerSecond float64 `json:"node_status_writes_per_second"`
	PodReplacedPerSec   float64 `json:"pods_replaced_per_second"`
	ScaleEventsPerSec   float64 `json:"rsp_scale_events_per_second"`
}

// planChurn spreads each stream evenly: nodes node status reports every
// NodeStatusEvery, PodPercentPerMin % of pods per minute, ScalePerMin
// scale events per minute.
func planChurn(r churnRates, nodes, pods int) churnPlan {
	r.NodeStatusEverySeconds = r.NodeStatusEvery.Seconds()
	p := churnPlan{Rates: r}
	if r.NodeStatusEvery > 0 && nodes > 0 {
		p.NodeStatusPerSecond = float64(nodes) / r.NodeStatusEvery.Seconds()
	}
	if r.PodPercentPerMin > 0 && pods > 0 {
		p.PodReplacedPerSec = float64(pods) * r.PodPercentPerMin / 100 / 60
	}
	if r.ScalePerMin > 0 {
		p.ScaleEventsPerSec = r.ScalePerMin / 60
	}
	p.NodeInterval = intervalFor(p.NodeStatusPerSecond)
	p.PodInterval = intervalFor(p.PodReplacedPerSec)
	p.ScaleInterval = intervalFor(p.ScaleEventsPerSec)
	return p
}

// intervalFor is the time between two operations at perSecond (0: none).
func intervalFor(perSecond float64) time.Duration {
	if perSecond <= 0 || math.IsInf(perSecond, 0) || math.IsNaN(perSecond) {
		return 0
	}
	return time.Duration(float64(time.Second) / perSecond)
}

// opAt is when operation i of a stream that started at start is due:
// operations are spaced evenly, never bunched to catch up a rate.
func opAt(start time.Time, interval time.Duration, i int) time.Time {
	return start.Add(time.Duration(i) * interval)
}

// interleave orders items of several lists round-robin (member1's first,
// member2's first, ..., member1's second, ...), so each member's share of a
// stream is spread over its period as well.
func interleave[T any](lists [][]T) []T {
	var out []T
	for i := 0; ; i++ {
		added := false
		for _, l := range lists {
			if i < len(l) {
				out = append(out, l[i])
				added = true
			}
		}
		if !added {
			return out
		}
	}
}

// churnStats is what one stream did.
type churnStats struct {
	Done   int `json:"done"`
	Errors int `json:"errors"`
	// MaxLagSeconds is the most an operation started after it was due.
	MaxLagSeconds float64 `json:"max_lag_seconds"`
	FirstError    string  `json:"first_error,omitempty"`
}

// runStream starts op(i) at opAt(start, interval, i) until ctx ends, with
// at most workers operations in flight (an API server's latency must not
// cap the rate); an operation that has to wait for a worker starts late,
// and the lag says how late. It returns when every started operation has.
func runStream(ctx context.Context, start time.Time, interval time.Duration, workers int, op func(context.Context, int) error) churnStats {
	var (
		s  churnStats
		mu sync.Mutex
		wg sync.WaitGroup
	)
	if interval <= 0 {
		return s
	}
	slots := make(chan struct{}, max(workers, 1))
	for i := 0; ; i++ {
		at := opAt(start, interval, i)
		if err := sleepCtx(ctx, time.Until(at)); err != nil {
			break
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		lag := round3(time.Since(at).Seconds())
		wg.Go(func() {
			defer func() { <-slots }()
			err := op(ctx, i)
			mu.Lock()
			defer mu.Unlock()
			s.MaxLagSeconds = math.Max(s.MaxLagSeconds, lag)
			switch {
			case err == nil:
				s.Done++
			case ctx.Err() == nil:
				s.Errors++
				if s.FirstError == "" {
					s.FirstError = err.Error()
				}
			}
		})
	}
	wg.Wait()
	return s
}

// churnResult is the driver's report.
type churnResult struct {
	Plan    churnPlan  `json:"plan"`
	Seconds float64    `json:"seconds"`
	Nodes   churnStats `json:"node_status"`
	Pods    churnStats `json:"pods_replaced"`
	Scales  churnStats `json:"rsp_scale_events"`
}

// maxLagSeconds is the most any stream fell behind its schedule.
func (c *churnResult) maxLagSeconds() float64 {
	if c == nil {
		return 0
	}
	return math.Max(c.Nodes.MaxLagSeconds, math.Max(c.Pods.MaxLagSeconds, c.Scales.MaxLagSeconds))
}

// scChurnWorkers bounds the node status and pod operations in flight.
const scChurnWorkers = 8

// churnTarget is one bulk object of a member.
type churnTarget struct {
	member string
	node   string
	index  int // the member's index (member<index>)
	j      int // the pod's index on its node
	name   string
}

// scChurn is a running churn driver.
type scChurn struct {
	stop  context.CancelFunc
	wg    sync.WaitGroup
	start time.Time
	res   churnResult
}

// startChurn starts the three streams over the bulk objects populate made
// (static nodes and the pods without volumes: a pod with a claim stays, its
// VolumeAttachment with it).
func (b *scBench) startChurn(ctx context.Context, plan churnPlan) (*scChurn, error) {
	var nodeLists, podLists [][]churnTarget
	for mi, m := range b.l.Members() {
		var nodes, pods []churnTarget
		for i := 0; i < b.o.nodes; i++ {
			node := fmt.Sprintf("%s-bulk-%d", m, i)
			nodes = append(nodes, churnTarget{member: m, node: node})
			for j := 0; j < b.o.podsPerNode; j++ {
				if !lab.IsVolumePod(i*b.o.podsPerNode+j, scVolumeEvery) {
					pods = append(pods, churnTarget{member: m, index: mi + 1, node: node, j: j, name: lab.ScalePodName(node, j)})
				}
			}
		}
		nodeLists, podLists = append(nodeLists, nodes), append(podLists, pods)
	}
	nodes, pods := interleave(nodeLists), interleave(podLists)
	if len(nodes) == 0 {
		plan.NodeInterval = 0
	}
	if len(pods) == 0 { // every pod mounts a claim: none is replaced
		plan.PodInterval = 0
	}
	clients := map[string]client.Client{}
	for _, m := range b.l.Members() {
		cl, err := b.l.Client(m)
		if err != nil {
			return nil, err
		}
		clients[m] = cl
	}
	members := len(b.l.Members())
	cctx, stop := context.WithCancel(ctx)
	c := &scChurn{stop: stop, start: time.Now(), res: churnResult{Plan: plan}}
	c.wg.Go(func() {
		c.res.Nodes = runStream(cctx, c.start, plan.NodeInterval, scChurnWorkers, func(ctx context.Context, i int) error {
			t := nodes[i%len(nodes)]
			return lab.Heartbeat(ctx, clients[t.member], t.node, time.Now())
		})
	})
	c.wg.Go(func() {
		// Operation i replaces slot i mod len(pods) for the
		// (i / len(pods) + 1)-th time: names follow from i, so
		// operations in flight share no state.
		workers := min(scChurnWorkers, len(pods))
		c.res.Pods = runStream(cctx, c.start, plan.PodInterval, workers, func(ctx context.Context, i int) error {
			t := pods[i%len(pods)]
			round := i / len(pods)
			old := t.name
			if round > 0 {
				old = fmt.Sprintf("%s-g%d", t.name, round)
			}
			cl := clients[t.member]
			// No kubelet finishes the pod: it is removed at once, as a
			// kubelet's confirmation would.
			gone := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: scBulkNS, Name: old}}
			if err := cl.Delete(ctx, gone, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			pod := lab.NewScalePod(scBulkNS, fmt.Sprintf("%s-g%d", t.name, round+1), t.node)
			return lab.CreateStaticPod(ctx, cl, pod, lab.StaticPodIP(t.index, i))
		})
	})
	up := map[int]bool{} // RSPs the driver scaled up and not yet back
	c.wg.Go(func() {
		// One at a time: an event lowers what the one before raised.
		c.res.Scales = runStream(cctx, c.start, plan.ScaleInterval, 1, func(ctx context.Context, i int) error {
			rsp, raise := (i/2)%b.o.rsps, i%2 == 0
			total := members
			if raise {
				total++
			}
			err := b.scaleRSP(ctx, rsp, total)
			if err == nil || raise {
				up[rsp] = raise // a failed raise may have landed: lowered at the end
			}
			return err
		})
		// An RSP left scaled up goes back down: later steps expect the
		// population they made.
		for rsp, on := range up {
			if !on {
				continue
			}
			if err := b.scaleRSP(ctx, rsp, members); err != nil {
				b.progress("churn: scaling %s-%d back: %v", scWorkload, rsp, err)
			}
		}
	})
	return c, nil
}

// scaleRSP sets RSP i's totalReplicas (kubefed scales its Deployments).
func (b *scBench) scaleRSP(ctx context.Context, i, total int) error {
	rsp := &fedschedv1a1.ReplicaSchedulingPreference{ObjectMeta: metav1.ObjectMeta{Namespace: scNamespace, Name: fmt.Sprintf("%s-%d", scWorkload, i)}}
	patch := []byte(fmt.Sprintf(`{"spec":{"totalReplicas":%d}}`, total))
	return b.host.Patch(ctx, rsp, client.RawPatch("application/merge-patch+json", patch))
}

// finish stops the driver and returns what it did.
func (c *scChurn) finish() churnResult {
	c.stop()
	c.wg.Wait()
	c.res.Seconds = round1(time.Since(c.start).Seconds())
	return c.res
}
