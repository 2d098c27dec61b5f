package lab

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
)

// ProcStatus is one process line of Status.
type ProcStatus struct {
	Key       string
	Component string
	Node      string
	PID       int
	Port      int
	State     ProcState
	RSS       int64
}

// ClusterStatus sums up one cluster.
type ClusterStatus struct {
	Name, Role string
	APIPort    int
	Nodes      int
	RSS        int64
	Procs      []ProcStatus
}

// LabStatus is what `fedfailover-lab status` prints.
type LabStatus struct {
	Dir, Kubeconfig string
	SupervisorPID   int
	SupervisorState ProcState
	Ready           bool
	StartupSecs     float64
	Clusters        []ClusterStatus
	TotalRSS        int64
}

// Status reads the state and /proc for every lab process.
func (l *Lab) Status() (*LabStatus, error) {
	st, err := l.State()
	if err != nil {
		return nil, err
	}
	out := &LabStatus{
		Dir: st.Dir, Kubeconfig: st.Kubeconfig, SupervisorPID: st.SupervisorPID,
		SupervisorState: procState(st.SupervisorPID), Ready: st.Ready, StartupSecs: st.StartupSecs,
	}
	for _, c := range st.Clusters {
		cs := ClusterStatus{Name: c.Name, Role: c.Role, APIPort: c.APIPort, Nodes: len(c.Nodes)}
		for _, p := range st.Procs {
			if p.Cluster != c.Name {
				continue
			}
			ps := ProcStatus{Key: p.Key(), Component: p.Component, Node: p.Node, PID: p.PID, Port: p.Port, State: procState(p.PID)}
			if ps.State != ProcGone {
				ps.RSS = rssBytes(p.PID)
			}
			cs.RSS += ps.RSS
			cs.Procs = append(cs.Procs, ps)
		}
		sort.SliceStable(cs.Procs, func(i, j int) bool { return stopRank[cs.Procs[i].Component] < stopRank[cs.Procs[j].Component] })
		out.TotalRSS += cs.RSS
		out.Clusters = append(out.Clusters, cs)
	}
	return out, nil
}

// MiB formats bytes as MiB.
func MiB(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// Print writes a human-readable status table.
func (s *LabStatus) Print(w io.Writer) {
	// Output errors are not actionable for a status table.
	pf := func(w io.Writer, f string, a ...any) { _, _ = fmt.Fprintf(w, f, a...) }
	pf(w, "lab %s (supervisor pid %d %s, ready=%v, startup %.1fs)\nkubeconfig: %s\n\n",
		s.Dir, s.SupervisorPID, s.SupervisorState, s.Ready, s.StartupSecs, s.Kubeconfig)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	pf(tw, "CLUSTER\tROLE\tAPI\tNODES\tRSS\n")
	for _, c := range s.Clusters {
		pf(tw, "%s\t%s\thttps://127.0.0.1:%d\t%d\t%s\n", c.Name, c.Role, c.APIPort, c.Nodes, MiB(c.RSS))
	}
	pf(tw, "total\t\t\t\t%s\n", MiB(s.TotalRSS))
	_ = tw.Flush()
	pf(w, "\n")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	pf(tw, "PROCESS\tPID\tPORT\tSTATE\tRSS\n")
	for _, c := range s.Clusters {
		for _, p := range c.Procs {
			port := "-"
			if p.Port > 0 {
				port = fmt.Sprint(p.Port)
			}
			pf(tw, "%s\t%d\t%s\t%s\t%s\n", p.Key, p.PID, port, p.State, MiB(p.RSS))
		}
	}
	_ = tw.Flush()
}

// Diagnose writes what a failed test needs to know about the lab: the status
// table and the log tail of every control-plane process that is no longer
// running, plus the kubefed controller-manager's (the usual suspect).
func (l *Lab) Diagnose(w io.Writer, lines int) {
	s, err := l.Status()
	if err != nil {
		_, _ = fmt.Fprintf(w, "lab status: %v\n", err)
		return
	}
	s.Print(w)
	st, err := l.State()
	if err != nil {
		return
	}
	for _, p := range st.Procs {
		if p.Component == CompKwok {
			continue // powered-off nodes are expected to be gone
		}
		if procState(p.PID) == ProcGone || p.Component == CompKubefedCM {
			_, _ = fmt.Fprintf(w, "\n--- %s (%s): last %d lines of %s ---\n%s\n", p.Key(), procState(p.PID), lines, p.Log, logTail(p.Log, lines))
		}
	}
}
