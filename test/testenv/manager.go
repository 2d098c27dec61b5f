package testenv

import (
	"context"
	"errors"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// managerStopWait bounds how long a test's end waits for its manager.
const managerStopWait = 30 * time.Second

// RunManager runs mgr on ctx until the test ends. cancel must cancel ctx
// (the context the test's controllers were set up with): the test's end
// calls it and waits for the manager to return. Cleanups registered before
// RunManager run after the manager stopped (a check of its logs).
func RunManager(t testing.TB, ctx context.Context, cancel context.CancelFunc, mgr manager.Manager) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("manager: %v", err)
			}
		case <-time.After(managerStopWait):
			t.Errorf("manager did not stop within %v", managerStopWait)
		}
	})
}
