// Command fedfailover-bench runs fedfailover's benchmarks on the local
// federation (test/bench) and prints a table (median, p95 and the baseline
// each figure is compared with). With BENCH_JSON=FILE it also writes the
// figures as JSON.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fedfailover/fedfailover/internal/version"
	"github.com/fedfailover/fedfailover/test/bench"
)

func main() {
	logger := zap.New(zap.UseDevMode(false), zap.Level(bench.LogLevel))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	if err := rootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "fedfailover-bench",
		Short:         "Benchmarks of fedfailover on the local federation",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Get().Version,
	}
	root.SetVersionTemplate(version.Line("fedfailover-bench") + "\n")
	root.AddCommand(bench.Commands()...)
	return root
}
