package bench

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// scalePlanCmd computes the capacity plan from two scale runs' JSON.
func scalePlanCmd() *cobra.Command {
	var members, nodes, podsPerNode int
	var limitMB float64
	cmd := &cobra.Command{
		Use:   "scale-plan A.json B.json",
		Short: "Memory per member and per 10k pods from two scale runs (BENCH_JSON), extrapolated to a federation",
		Long: `Fits RSS = base + per-member x members + per-pod x pods exactly to two runs of
the scale benchmark whose members-to-pods ratios differ (e.g. goal and
members), base being the first run's RSS before any member connected, and
prints the model, its prediction for --members x --nodes x --pods-per-node
and how many such members one replica holds within --limit-mb.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var pts [2]CostPoint
			base := 0.0
			for i, path := range args {
				r, err := readScaleResult(path)
				if err != nil {
					return err
				}
				pts[i] = CostPoint{Members: r.Members, Pods: r.PodsTotal, MB: max(r.RSSAfterSyncMB, r.RSSAfterSteadyMB)}
				if i == 0 {
					base = r.BaseRSSMB
				}
			}
			m, err := FitCosts(base, pts[0], pts[1])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			pods := members * nodes * podsPerNode
			fmt.Fprintf(out, "measured: %d members x %d pods -> %.0f MB; %d members x %d pods -> %.0f MB; base %.0f MB\n",
				pts[0].Members, pts[0].Pods, pts[0].MB, pts[1].Members, pts[1].Pods, pts[1].MB, base)
			fmt.Fprintf(out, "model: %.1f MB per member, %.1f MB per 10k pods\n", m.PerMemberMB, m.PerPodMB*10000)
			fmt.Fprintf(out, "computed: %d members x %d nodes x %d pods (%d pods) -> %.0f MB in one process\n",
				members, nodes, podsPerNode, pods, m.Predict(members, pods))
			fmt.Fprintf(out, "computed: members of %d pods per replica within %.0f MB: %d\n",
				nodes*podsPerNode, limitMB, m.MembersPerReplica(limitMB, nodes*podsPerNode))
			return nil
		},
	}
	cmd.Flags().IntVar(&members, "members", 10, "members of the federation to plan for")
	cmd.Flags().IntVar(&nodes, "nodes", 5000, "nodes per member")
	cmd.Flags().IntVar(&podsPerNode, "pods-per-node", 10, "pods per node")
	cmd.Flags().Float64Var(&limitMB, "limit-mb", 1024, "a replica's memory limit")
	return cmd
}

func readScaleResult(path string) (*scResult, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Benchmark string   `json:"benchmark"`
		Result    scResult `json:"result"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if doc.Benchmark != "scale" {
		return nil, fmt.Errorf("%s: benchmark %q, want scale", path, doc.Benchmark)
	}
	return &doc.Result, nil
}
