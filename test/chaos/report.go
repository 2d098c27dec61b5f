package chaos

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"

	"github.com/fedfailover/fedfailover/test/bench"
)

// Report is a whole campaign.
type Report struct {
	Config Config       `json:"config"`
	Runs   []*RunResult `json:"runs"`
	// Faults counts the injected faults per kind.
	Faults map[Kind]int `json:"faults"`
	// Variants counts the injected node losses and evidence faults per
	// variant (Fault.Variant): how many losses were for evidence-first
	// detection, how many for the NotReady path, how many had no evidence.
	Variants map[string]int `json:"variants,omitempty"`
	// Violations counts violations per invariant.
	Violations map[string]int `json:"violations"`
	// Restarts counts manager starts after the first.
	Restarts int `json:"managerRestarts"`
}

func (r *Report) add(res *RunResult) {
	r.Runs = append(r.Runs, res)
	for _, a := range res.Timeline {
		if a.Error == "" && !a.Started.IsZero() {
			r.Faults[a.Kind]++
			if v := a.Variant(); v != "" {
				if r.Variants == nil {
					r.Variants = map[string]int{}
				}
				r.Variants[v]++
			}
		}
	}
	for _, v := range res.Violations {
		r.Violations[v.Invariant]++
	}
}

// Total is the number of violations.
func (r *Report) Total() int {
	n := 0
	for _, v := range r.Violations {
		n += v
	}
	return n
}

// destructive is the number of fedfailover's destructive acts in all runs.
func (r *Report) destructive() int {
	n := 0
	for _, res := range r.Runs {
		n += len(res.Destructive)
	}
	return n
}

// convergence returns the runs' convergence times that met the bound.
func (r *Report) convergence() []float64 {
	var xs []float64
	for _, res := range r.Runs {
		if res.Converged {
			xs = append(xs, res.ConvergenceSeconds)
		}
	}
	return xs
}

// Print writes the summary, the faults per kind and one line per run.
func (r *Report) Print(w io.Writer) error {
	conv := r.convergence()
	header := []string{"RUNS", "FAULTS"}
	row := []string{strconv.Itoa(len(r.Runs)), strconv.Itoa(sum(r.Faults))}
	for _, inv := range Invariants {
		header = append(header, inv)
		row = append(row, strconv.Itoa(r.Violations[inv]))
	}
	// Destructive acts next to I1: a campaign without any says nothing
	// about I1.
	header = append(header, "DESTRUCTIVE ACTS", "CONVERGENCE MEDIAN (s)", "P95 (s)", "BOUND", "MANAGER RESTARTS")
	row = append(row, strconv.Itoa(r.destructive()), bench.Seconds(bench.Median(conv)), bench.Seconds(bench.P95(conv)),
		r.Config.Bounds.Converge.String(), strconv.Itoa(r.Restarts))
	if err := bench.Table(w, header, [][]string{row}); err != nil {
		return err
	}
	fmt.Fprintln(w)
	var kinds [][]string
	for _, k := range Kinds {
		kinds = append(kinds, []string{string(k), strconv.Itoa(r.Faults[k])})
	}
	if err := bench.Table(w, []string{"FAULT", "INJECTED"}, kinds); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if len(r.Variants) > 0 {
		var variants [][]string
		for _, v := range slices.Sorted(maps.Keys(r.Variants)) {
			variants = append(variants, []string{v, strconv.Itoa(r.Variants[v])})
		}
		if err := bench.Table(w, []string{"VARIANT", "INJECTED"}, variants); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	var runs [][]string
	for _, res := range r.Runs {
		injected := 0
		for _, a := range res.Timeline {
			if a.Error == "" {
				injected++
			}
		}
		storm := "-"
		if res.StormSeen != "" {
			storm = "yes"
		}
		runs = append(runs, []string{strconv.Itoa(res.Run), strconv.FormatUint(res.Seed, 10), strconv.Itoa(injected),
			strconv.Itoa(len(res.Destructive)), strconv.Itoa(len(res.Violations)), convergedIn(res), storm})
	}
	if err := bench.Table(w, []string{"RUN", "SEED", "FAULTS", "DESTRUCTIVE ACTS", "VIOLATIONS", "CONVERGED (s)", "MEMBER STORM"}, runs); err != nil {
		return err
	}
	// A storm the checker saw moves I4's bound (storm.go): each is named.
	for _, res := range r.Runs {
		if res.StormSeen != "" {
			fmt.Fprintf(w, "run %d (seed %d): %s\n", res.Run, res.Seed, res.StormSeen)
		}
	}
	return nil
}

func sum(m map[Kind]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
