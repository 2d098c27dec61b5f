package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// inNetns runs open on an OS thread inside the network namespace netns
// (/run/netns/<netns>) and returns what it opened: a socket belongs to the
// namespace of the thread that creates it, so one locked thread enters,
// opens and leaves. A thread that cannot leave stays locked and ends with
// its goroutine, never running other goroutines in the wrong namespace.
func inNetns[T io.Closer](netns string, open func() (T, error)) (T, error) {
	type result struct {
		v   T
		ok  bool
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		back, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("opening own network namespace: %w", err)}
			return
		}
		defer func() { _ = back.Close() }()
		target, err := os.Open("/run/netns/" + netns)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("opening network namespace %s: %w", netns, err)}
			return
		}
		defer func() { _ = target.Close() }()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("entering network namespace %s: %w", netns, err)}
			return
		}
		v, oerr := open()
		if err := unix.Setns(int(back.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{v: v, ok: oerr == nil, err: errors.Join(oerr, fmt.Errorf("leaving network namespace %s: %w", netns, err))}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{v: v, ok: oerr == nil, err: oerr}
	}()
	r := <-ch
	if r.err != nil {
		if r.ok {
			_ = r.v.Close()
		}
		var zero T
		return zero, r.err
	}
	return r.v, nil
}

// DialInside returns a dial function that connects from inside the network
// namespace netns, e.g. to an isolated manager's metrics.
func DialInside(netns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return inNetns(netns, func() (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		})
	}
}
