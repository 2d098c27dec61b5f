package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/fedfailover/fedfailover/test/lab"
)

// progress prints one step of a benchmark session.
func progress(out io.Writer, format string, args ...any) {
	fmt.Fprintf(out, "==> "+format+"\n", args...)
}

// upLab starts the lab of one benchmark session in dir, or in a temporary
// folder when dir is empty, and says how long it took. down tears the lab
// down and removes the temporary folder; call it whatever happens next.
// The components' own logs stay in their files.
func upLab(ctx context.Context, dir string, o lab.Options, say func(string, ...any)) (l *lab.Lab, down func() error, err error) {
	removeDir := func() {}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "fedfailover-bench-"); err != nil {
			return nil, nil, err
		}
		removeDir = func() { _ = os.RemoveAll(dir) }
	}
	o.Dir = filepath.Join(dir, "lab")
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	start := time.Now()
	if l, err = lab.Up(ctx, o); err != nil {
		removeDir()
		return nil, nil, err
	}
	say("lab up in %s", time.Since(start).Round(time.Second))
	return l, func() error {
		defer removeDir()
		return l.Down(context.Background())
	}, nil
}

// downWith tears a session's lab down at the end of a run and keeps the
// run's own error first.
func downWith(err *error, down func() error) {
	*err = errors.Join(*err, down())
}
