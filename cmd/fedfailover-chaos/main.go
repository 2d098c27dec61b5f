// Command fedfailover-chaos runs the fault campaign: random faults on the
// local federation with the real manager binary under test, checked
// against the lab's ground truth and the API servers' audit logs
// (docs/chaos.md). It prints a table; BENCH_JSON=FILE also writes JSON.
// The exit status is 1 when an invariant was broken.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fedfailover/fedfailover/internal/version"
	"github.com/fedfailover/fedfailover/test/bench"
	"github.com/fedfailover/fedfailover/test/chaos"
)

func main() {
	logger := zap.New(zap.UseDevMode(false), zap.Level(zapcore.ErrorLevel))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	if err := command().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func command() *cobra.Command {
	cfg := chaos.Config{Bounds: chaos.DefaultBounds()}
	var seed int64
	cmd := &cobra.Command{
		Use:   "fedfailover-chaos",
		Short: "Randomized fault campaign against fedfailover on the local federation",
		Long: "Each run draws a schedule of faults from its seed (run i uses --seed + i - 1), injects them\n" +
			"into the lab with the manager binary running under leader election, checks invariants I1-I5\n" +
			"against the lab's ground truth and the audit logs, and waits for convergence. A run that breaks\n" +
			"an invariant prints its seed and timeline and keeps its logs; --seed S --runs 1 replays it.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Get().Version,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if seed < 0 {
				seed = time.Now().UnixNano() % 1_000_000
			}
			cfg.Seed = uint64(seed)
			if cfg.MaxHold < cfg.MinHold {
				return fmt.Errorf("--max-hold %s is shorter than --min-hold %s", cfg.MaxHold, cfg.MinHold)
			}
			if cfg.LossMaxHold < cfg.MaxHold {
				return fmt.Errorf("--loss-max-hold %s is shorter than --max-hold %s", cfg.LossMaxHold, cfg.MaxHold)
			}
			cfg.Logf = func(format string, args ...any) { fmt.Fprintf(cmd.OutOrStdout(), format+"\n", args...) }
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(cmd.OutOrStdout(), "==> campaign: %d runs from seed %d\n", cfg.Runs, cfg.Seed)
			rep, err := chaos.Run(ctx, cfg)
			if rep != nil {
				fmt.Fprintln(cmd.OutOrStdout())
				if perr := rep.Print(cmd.OutOrStdout()); perr != nil {
					return perr
				}
				if jerr := bench.WriteJSON(cmd.OutOrStdout(), rep); jerr != nil {
					return jerr
				}
			}
			if err != nil {
				return err
			}
			if n := rep.Total(); n > 0 {
				return errors.New(fmt.Sprint(n, " invariant violations (seeds and timelines above)"))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Runs, "runs", 3, "Number of runs.")
	f.Int64Var(&seed, "seed", -1, "Seed of the first run (default: from the clock; printed).")
	f.IntVar(&cfg.Members, "members", 2, "Member clusters in the lab.")
	f.IntVar(&cfg.Nodes, "nodes", 3, "kwok nodes per member.")
	f.DurationVar(&cfg.Window, "duration", 60*time.Second, "Fault window of each run (faults start inside it).")
	f.IntVar(&cfg.Faults, "faults", 6, "Faults drawn per run.")
	f.DurationVar(&cfg.MinHold, "min-hold", 10*time.Second, "Shortest time a fault stays.")
	f.DurationVar(&cfg.MaxHold, "max-hold", 40*time.Second, "Longest time a fault stays.")
	// The lab's node-monitor grace (16s) plus the campaign policy's
	// notReadyFor (10s) is 26s: most losses must outlast it to be acted on.
	f.DurationVar(&cfg.LossMaxHold, "loss-max-hold", 75*time.Second,
		"Longest time a power-off, replacement or partition stays (node losses need longer than the others to be acted on).")
	f.DurationVar(&cfg.Bounds.Converge, "converge-within", cfg.Bounds.Converge, "I4: bound on convergence after the last fault.")
	f.StringVar(&cfg.Dir, "dir", ".lab-chaos", "Lab directory (removed at the end).")
	f.StringVar(&cfg.KeepDir, "keep-dir", "_output/chaos", "Where the logs of a run that broke an invariant are kept.")
	f.BoolVar(&cfg.KeepGoing, "keep-going", false, "Go on with the next runs after a violation.")
	cmd.SetVersionTemplate(version.Line("fedfailover-chaos") + "\n")
	return cmd
}
