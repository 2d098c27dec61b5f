// Package poll is the one way the test rig waits: call a condition at a
// pace until it holds or a deadline passes, and say what was last seen. The
// lab, the benchmarks, the fault campaign, the demo and the tests all wait
// through it (never by sleeping a fixed time).
package poll

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Cond reports whether the awaited state holds. When it does not, why says
// what was seen instead; a non-nil err ends the wait at once.
type Cond func(ctx context.Context) (ok bool, why string, err error)

// Until calls cond every `every` until it holds, cond returns an error, the
// timeout passes or ctx ends. It returns how long the wait took; a timeout
// error names what was awaited and the last reason given.
func Until(ctx context.Context, timeout, every time.Duration, what string, cond Cond) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		ok, why, err := cond(ctx)
		if err != nil {
			return time.Since(start), fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return time.Since(start), nil
		}
		last = why
		select {
		case <-ctx.Done():
			if err := context.Cause(ctx); !errors.Is(err, context.DeadlineExceeded) {
				return time.Since(start), fmt.Errorf("waiting for %s: %w", what, err)
			}
			return time.Since(start), fmt.Errorf("timed out after %s waiting for %s; last: %s", timeout, what, last)
		case <-time.After(every):
		}
	}
}

// Retrying turns a condition whose errors are passing (an API server not
// answering yet) into a Cond: an error is the reason to keep waiting.
func Retrying(cond func(context.Context) (bool, error)) Cond {
	return func(ctx context.Context) (bool, string, error) {
		ok, err := cond(ctx)
		if ok {
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil //nolint:nilerr // an error here is a reason to keep waiting, not to stop
		}
		return false, "not yet", nil
	}
}

// Reason turns a condition that explains itself into a Cond.
func Reason(cond func(context.Context) (bool, string)) Cond {
	return func(ctx context.Context) (bool, string, error) {
		ok, why := cond(ctx)
		return ok, why, nil
	}
}

// NoError turns a check that returns nil once the state holds into a Cond.
func NoError(check func() error) Cond {
	return func(context.Context) (bool, string, error) {
		if err := check(); err != nil {
			return false, err.Error(), nil //nolint:nilerr // an error here is a reason to keep waiting, not to stop
		}
		return true, "", nil
	}
}

// T is Until for a test: it fails the test when the wait ends without the
// condition holding, and returns how long it took.
func T(t testing.TB, timeout, every time.Duration, what string, cond Cond) time.Duration {
	t.Helper()
	took, err := Until(t.Context(), timeout, every, what, cond)
	if err != nil {
		t.Fatal(err)
	}
	return took
}
