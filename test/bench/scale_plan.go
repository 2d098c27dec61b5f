package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

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
members, or a sharded run, whose point is its largest replica with the
members it held), base being the first run's RSS before any member connected, and
prints the model, its prediction for --members x --nodes x --pods-per-node
and how many such members one replica holds within --limit-mb. Every
number comes from the runs' JSON (BENCH_JSON): a run marked INVALID, or
one written before runs were judged, is refused. The manager's CPU at the
churn rate and the lab's cost per idle member are printed as measured.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var pts [2]CostPoint
			var runs [2]*scResult
			base := 0.0
			for i, path := range args {
				r, err := readScaleResult(path)
				if err != nil {
					return err
				}
				runs[i] = r
				pts[i] = costPoint(r)
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
			for i, r := range runs {
				fmt.Fprintf(out, "measured (%s): manager CPU %.2f %% of a core at the churn rate%s; load average at most %.2f\n",
					args[i], r.CPUPercent, churnWords(r.Churn), r.Validity.MaxLoad1)
				if c := r.IdleLab; c != nil {
					etcd := ""
					if c.SharedEtcd != nil {
						etcd = fmt.Sprintf("; shared etcd %.2f %% / %.0f MB", c.SharedEtcd.CPUPercent, c.SharedEtcd.RSSMB)
					}
					fmt.Fprintf(out, "measured (%s): an idle member's lab processes %.2f %% of a core, %.0f MB RSS (shared etcd: %t%s)\n",
						args[i], c.MemberMean.CPUPercent, c.MemberMean.RSSMB, r.SharedEtcd, etcd)
				}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&members, "members", 10, "members of the federation to plan for")
	cmd.Flags().IntVar(&nodes, "nodes", 5000, "nodes per member")
	cmd.Flags().IntVar(&podsPerNode, "pods-per-node", 10, "pods per node")
	cmd.Flags().Float64Var(&limitMB, "limit-mb", 1024, "a replica's memory limit")
	return cmd
}

// costPoint is what one process held at a run's largest memory: the whole
// federation, or, sharded, the largest replica's own members and their
// share of the pods (members are of equal size).
func costPoint(r *scResult) CostPoint {
	if len(r.Replicas) < 2 {
		return CostPoint{Members: r.Members, Pods: r.PodsTotal, MB: max(r.RSSAfterSyncMB, r.RSSAfterSteadyMB)}
	}
	top := r.Replicas[0]
	for _, x := range r.Replicas[1:] {
		if max(x.RSSAfterSyncMB, x.RSSAfterSteadyMB) > max(top.RSSAfterSyncMB, top.RSSAfterSteadyMB) {
			top = x
		}
	}
	held := len(top.Members)
	return CostPoint{Members: held, Pods: r.PodsTotal * held / max(r.Members, 1), MB: max(top.RSSAfterSyncMB, top.RSSAfterSteadyMB)}
}

func readScaleResult(path string) (*scResult, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Benchmark      string   `json:"benchmark"`
		Valid          *bool    `json:"valid"`
		InvalidReasons []string `json:"invalid_reasons"`
		Result         scResult `json:"result"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case doc.Benchmark != "scale":
		return nil, fmt.Errorf("%s: benchmark %q, want scale", path, doc.Benchmark)
	case doc.Valid == nil:
		return nil, fmt.Errorf("%s: a run from before runs were judged valid or not; run the scale benchmark again", path)
	case !*doc.Valid:
		return nil, fmt.Errorf("%s: an INVALID run (%s) has no figures to plan from", path, strings.Join(doc.InvalidReasons, "; "))
	case doc.Result.RSSAfterSyncMB <= 0 || doc.Result.BaseRSSMB <= 0:
		return nil, fmt.Errorf("%s: no RSS measured", path)
	}
	return &doc.Result, nil
}

// churnWords states the churn rates a run was measured at.
func churnWords(c *churnResult) string {
	if c == nil {
		return " (no churn)"
	}
	return fmt.Sprintf(" (a status report per node every %.0fs, %.2f %% of pods replaced per minute, %.1f RSP scale events per minute)",
		c.Plan.Rates.NodeStatusEverySeconds, c.Plan.Rates.PodPercentPerMin, c.Plan.Rates.ScalePerMin)
}
