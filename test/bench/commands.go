// Package bench holds fedfailover's benchmarks on the local federation (the
// members, recovery, rebalance and scale suites) and the statistics they
// print: median, p95 and the baseline each figure is compared with.
// cmd/fedfailover-bench is its command line.
package bench

import (
	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
)

// LogLevel is the level the benchmark command logs at: the tables are its
// output, the components log to their own files.
const LogLevel = zapcore.ErrorLevel

// Commands are the benchmark subcommands of cmd/fedfailover-bench.
func Commands() []*cobra.Command {
	return []*cobra.Command{
		membersCmd(), measureMemberCmd(),
		rebalanceCmd(),
		recoveryCmd(),
		scaleCmd(), scalePlanCmd(),
	}
}
