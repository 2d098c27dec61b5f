package bench

import (
	"context"
	"math"
	"time"

	poller "github.com/fedfailover/fedfailover/test/poll"
)

// pollPace is how often benchmarks sample the clusters.
const pollPace = 250 * time.Millisecond

// poll calls cond every pollPace until it holds, returns an error, or timeout
// passes; the timeout error carries cond's last explanation.
func poll(ctx context.Context, timeout time.Duration, what string, cond poller.Cond) error {
	return pollEvery(ctx, timeout, pollPace, what, cond)
}

// pollEvery is poll at another pace, for conditions that are costly to read.
func pollEvery(ctx context.Context, timeout, every time.Duration, what string, cond poller.Cond) error {
	_, err := poller.Until(ctx, timeout, every, what, cond)
	return err
}

// round1 rounds to one decimal, as the benchmark tables print.
func round1(v float64) float64 { return math.Round(v*10) / 10 }
