package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// pollPace is how often benchmarks sample the clusters.
const pollPace = 250 * time.Millisecond

// poll calls cond every pollPace until it holds, returns an error, or timeout
// passes; the timeout error carries cond's last explanation.
func poll(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, string, error)) error {
	return pollEvery(ctx, timeout, pollPace, what, cond)
}

// pollEvery is poll at another pace, for conditions that are costly to read.
func pollEvery(ctx context.Context, timeout, every time.Duration, what string, cond func(context.Context) (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		ok, why, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		last = why
		select {
		case <-ctx.Done():
			if err := context.Cause(ctx); !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("waiting for %s: %w", what, err)
			}
			return fmt.Errorf("timed out after %s waiting for %s; last: %s", timeout, what, last)
		case <-time.After(every):
		}
	}
}

// round1 rounds to one decimal, as the benchmark tables print.
func round1(v float64) float64 { return math.Round(v*10) / 10 }
