package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedfailover/fedfailover/internal/cli"
)

type statusOptions struct {
	*rootOptions
	output   string
	watch    bool
	interval time.Duration
}

func newStatusCommand(root *rootOptions) *cobra.Command {
	o := &statusOptions{rootOptions: root}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Members, policies, RSPs, node recoveries and recent decisions",
		Example: "  kubectl failover status\n  kubectl failover status -o wide\n" +
			"  kubectl failover status -o yaml\n  kubectl failover status --watch --interval 5s",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateOutput(o.output); err != nil {
				return err
			}
			if o.watch {
				return o.watchStatus(cmd)
			}
			s, err := o.gather(cmd.Context(), cmd)
			if err != nil {
				return err
			}
			return o.print(o.streams.Out, s)
		},
	}
	addOutputFlag(cmd, &o.output)
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "Print the status again whenever it changes, until Ctrl-C.")
	cmd.Flags().DurationVar(&o.interval, "interval", 2*time.Second, "How often --watch polls the host cluster.")
	return cmd
}

func (o *statusOptions) print(w io.Writer, s *cli.Snapshot) error {
	v := cli.BuildStatus(s)
	return cli.Print(w, o.output, v, func(w io.Writer, wide bool) error { return cli.RenderStatus(w, v, wide) })
}

// watchStatus polls the host and re-renders when an object read changed.
// Transient read errors are reported and retried; missing CRDs or
// permissions end the watch.
func (o *statusOptions) watchStatus(cmd *cobra.Command) error {
	ctx := cmd.Context()
	last := ""
	for {
		s, err := o.gather(ctx, cmd)
		switch {
		case isDone(ctx):
			return nil // Ctrl-C
		case errors.Is(err, cli.ErrCRDMissing), errors.Is(err, cli.ErrForbidden):
			return err
		case err != nil:
			_, _ = fmt.Fprintln(o.streams.ErrOut, "error:", err)
		case s.Fingerprint() != last:
			if err := o.printWatched(s, last == ""); err != nil {
				return err
			}
			last = s.Fingerprint()
		}
		if !sleep(ctx, o.interval) {
			return nil
		}
	}
}

func (o *statusOptions) printWatched(s *cli.Snapshot, first bool) error {
	if !first {
		if _, err := fmt.Fprintf(o.streams.Out, "\n--- %s ---\n", s.Now.UTC().Format(time.RFC3339)); err != nil {
			return err
		}
	}
	return o.print(o.streams.Out, s)
}

// sleep waits d or until ctx ends; it reports whether to go on.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func isDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}
