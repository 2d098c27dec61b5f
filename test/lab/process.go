package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ProcState is what /proc says about a process.
type ProcState int

// Process states the lab cares about.
const (
	ProcGone ProcState = iota
	ProcRunning
	ProcStopped // SIGSTOPped: a partitioned node
)

func (s ProcState) String() string {
	switch s {
	case ProcRunning:
		return "running"
	case ProcStopped:
		return "stopped"
	default:
		return "gone"
	}
}

// ProcessState reports whether the process pid runs, is stopped or is gone.
func ProcessState(pid int) ProcState { return procState(pid) }

// procState reads /proc/<pid>/stat. A zombie counts as gone: it no longer
// does anything, it only waits for its parent to reap it.
func procState(pid int) ProcState {
	if pid <= 0 {
		return ProcGone
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcGone
	}
	// The state follows the command name, which is in parentheses and may
	// itself contain spaces or parentheses.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ProcGone
	}
	switch s[i+2] {
	case 'Z', 'X', 'x':
		return ProcGone
	case 'T', 't':
		return ProcStopped
	default:
		return ProcRunning
	}
}

// rssBytes returns the resident set size of pid, 0 when unknown.
func rssBytes(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			fields := strings.Fields(v)
			if len(fields) > 0 {
				kb, _ := strconv.ParseInt(fields[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// startProc starts p in its own process group with output appended to its
// log. When owned is true the child is also killed if this process dies
// (Pdeathsig), so a crashed test or supervisor leaves no orphans; fault
// commands run from a short-lived CLI start children with owned=false.
func startProc(p *Proc, owned bool) error {
	if err := os.MkdirAll(filepath.Dir(p.Log), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	_, _ = fmt.Fprintf(logf, "\n=== %s starting %s %s\n", time.Now().Format(time.RFC3339), p.Binary, strings.Join(p.Args, " "))
	cmd := exec.Command(p.Binary, p.Args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if owned {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	// Taken before the process exists, so no part of its life precedes it.
	p.StartedAt = time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Key(), err)
	}
	p.PID = cmd.Process.Pid
	// Reap the child whenever it exits, whoever killed it.
	go func() { _ = cmd.Wait() }()
	return nil
}

// signalGroup sends sig to the process group led by pid.
func signalGroup(pid int, sig syscall.Signal) {
	if pid > 0 {
		_ = syscall.Kill(-pid, sig)
	}
}

// stopProc terminates p's whole process group: SIGTERM (and SIGCONT, so a
// stopped process can act on it), then SIGKILL after grace.
func stopProc(p *Proc, grace time.Duration) {
	if procState(p.PID) == ProcGone {
		signalGroup(p.PID, syscall.SIGKILL) // stray group members, if any
		return
	}
	if grace > 0 {
		signalGroup(p.PID, syscall.SIGTERM)
		signalGroup(p.PID, syscall.SIGCONT)
		if waitGone(p.PID, grace) {
			signalGroup(p.PID, syscall.SIGKILL)
			return
		}
	}
	signalGroup(p.PID, syscall.SIGKILL)
	waitGone(p.PID, 5*time.Second)
}

func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if procState(pid) == ProcGone {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return procState(pid) == ProcGone
}

// logTail returns the last n lines of a log file for error messages.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ComponentError reports a component that failed to start, with its log tail.
type ComponentError struct {
	Proc    string
	Log     string
	Tail    string
	Problem error
}

func (e *ComponentError) Error() string {
	return fmt.Sprintf("%s failed to start: %v\n--- last lines of %s ---\n%s", e.Proc, e.Problem, e.Log, e.Tail)
}

func (e *ComponentError) Unwrap() error { return e.Problem }

// waitReady polls check until it succeeds, the process dies or the timeout
// passes; failures carry the tail of the process log.
func waitReady(ctx context.Context, p *Proc, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if procState(p.PID) == ProcGone {
			return &ComponentError{Proc: p.Key(), Log: p.Log, Tail: logTail(p.Log, 25), Problem: errors.New("process exited")}
		}
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return &ComponentError{Proc: p.Key(), Log: p.Log, Tail: logTail(p.Log, 25),
				Problem: fmt.Errorf("not ready after %s: %w", timeout, last)}
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stopAll stops procs in teardown order (kwok first, etcd last); processes of
// the same rank are stopped in parallel.
func stopAll(procs []*Proc, grace time.Duration) {
	byRank := map[int][]*Proc{}
	for _, p := range procs {
		byRank[stopRank[p.Component]] = append(byRank[stopRank[p.Component]], p)
	}
	ranks := make([]int, 0, len(byRank))
	for r := range byRank {
		ranks = append(ranks, r)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(ranks)))
	for _, r := range ranks {
		done := make(chan struct{})
		for _, p := range byRank[r] {
			go func() {
				g := grace
				if p.Component == CompKwok {
					g = 0 // a simulated kubelet has nothing to flush
				}
				stopProc(p, g)
				done <- struct{}{}
			}()
		}
		for range byRank[r] {
			<-done
		}
	}
}
