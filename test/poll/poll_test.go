package poll

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	took, err := Until(context.Background(), 5*time.Second, time.Millisecond, "three calls", func(context.Context) (bool, string, error) {
		calls++
		return calls == 3, "fewer than three", nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("err %v after %d calls, want nil after 3", err, calls)
	}
	if took <= 0 || took > 5*time.Second {
		t.Errorf("took %s, want a positive duration under the timeout", took)
	}
}

func TestUntilNamesWhatAndTheLastReasonOnTimeout(t *testing.T) {
	_, err := Until(context.Background(), 20*time.Millisecond, time.Millisecond, "the node Ready", Reason(func(context.Context) (bool, string) {
		return false, "Ready=Unknown"
	}))
	if err == nil || !strings.Contains(err.Error(), "the node Ready") || !strings.Contains(err.Error(), "Ready=Unknown") {
		t.Fatalf("err %v, want a timeout naming what and the last reason", err)
	}
}

func TestUntilStopsAtAnError(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	_, err := Until(context.Background(), 5*time.Second, time.Millisecond, "x", func(context.Context) (bool, string, error) {
		calls++
		return false, "", boom
	})
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("err %v after %d calls, want boom after 1", err, calls)
	}
}

func TestRetryingKeepsWaitingThroughErrors(t *testing.T) {
	calls := 0
	_, err := Until(context.Background(), 5*time.Second, time.Millisecond, "x", Retrying(func(context.Context) (bool, error) {
		calls++
		if calls < 3 {
			return false, errors.New("connection refused")
		}
		return true, nil
	}))
	if err != nil || calls != 3 {
		t.Fatalf("err %v after %d calls, want nil after 3", err, calls)
	}
	_, err = Until(context.Background(), 10*time.Millisecond, time.Millisecond, "y", Retrying(func(context.Context) (bool, error) {
		return false, errors.New("connection refused")
	}))
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err %v, want the last error as the reason", err)
	}
}

func TestNoError(t *testing.T) {
	n := 0
	_, err := Until(context.Background(), 5*time.Second, time.Millisecond, "x", NoError(func() error {
		if n++; n < 2 {
			return errors.New("not yet")
		}
		return nil
	}))
	if err != nil || n != 2 {
		t.Fatalf("err %v after %d calls", err, n)
	}
}
