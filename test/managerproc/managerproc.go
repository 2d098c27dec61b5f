// Package managerproc runs the real manager binary (cmd/manager) as its own
// process, optionally inside a lab network namespace, for the tools that
// must see it as users run it: kill -9 is real, its memory and CPU are its
// own. The chaos campaign and the scale benchmark use it.
package managerproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fedfailover/fedfailover/test/lab"
)

// Build compiles ./cmd/manager of the repository at root into dir.
func Build(root, dir string) (string, error) {
	bin := filepath.Join(dir, "fedfailover-manager")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/manager: %w\n%s", err, out)
	}
	return bin, nil
}

// Options says how to run one manager process.
type Options struct {
	// Bin is the manager binary (Build).
	Bin string
	// Args are its flags (--kubeconfig, --leader-elect, ...).
	Args []string
	// Log receives stdout and stderr (appended, so restarts share a file).
	Log string
	// Isolation, when set, runs the manager inside that network namespace.
	Isolation *lab.Isolation
}

// Process is one running manager.
type Process struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}

	mu  sync.Mutex
	err error // the exit, once done is closed
}

// Start starts the manager in its own process group; it dies with the
// calling process (Pdeathsig) so a crashed tool leaves no orphan.
func Start(o Options) (*Process, error) {
	if err := os.MkdirAll(filepath.Dir(o.Log), 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(o.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	var cmd *exec.Cmd
	if o.Isolation != nil {
		cmd = o.Isolation.Command(o.Bin, o.Args...)
	} else {
		cmd = exec.Command(o.Bin, o.Args...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("starting %s: %w", o.Bin, err)
	}
	p := &Process{cmd: cmd, log: logf, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		_ = logf.Close()
		close(p.done)
	}()
	return p, nil
}

// PID is the manager's process id (ip netns exec execs it in place).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.err
	default:
		return false, nil
	}
}

// Kill sends SIGKILL to the manager's process group and waits for it: no
// shutdown hook, no lease release, as when a node dies under it.
func (p *Process) Kill() error {
	_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("manager %d still running 10s after SIGKILL", p.PID())
	}
}

// Stop sends SIGTERM and waits grace for a clean exit, then kills. A clean
// exit (0, or the signal's exit status) is not an error.
func (p *Process) Stop(grace time.Duration) error {
	_ = syscall.Kill(-p.PID(), syscall.SIGTERM)
	select {
	case <-p.done:
		_, err := p.Exited()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			return err
		}
		return nil
	case <-time.After(grace):
		_ = p.Kill()
		return fmt.Errorf("manager %d did not stop within %s of SIGTERM", p.PID(), grace)
	}
}

// Usage is what the kernel accounts to the process.
type Usage struct {
	// RSS is the resident set size in bytes.
	RSS int64
	// CPU is user plus system time used since the start.
	CPU time.Duration
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// Sample reads the manager's resident memory and CPU time from /proc.
func (p *Process) Sample() (Usage, error) { return sample(p.PID()) }

// SamplePID reads any process's resident memory and CPU time from /proc
// (the scale benchmark's lab processes).
func SamplePID(pid int) (Usage, error) { return sample(pid) }

func sample(pid int) (Usage, error) {
	var u Usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// The command name (field 2) may hold spaces: fields count from its ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return u, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime 15, rss (pages) 24.
	if len(f) < 22 {
		return u, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	pages, err3 := strconv.ParseInt(f[21], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return u, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	u.CPU = time.Duration(utime+stime) * time.Second / clockTicks
	u.RSS = pages * int64(os.Getpagesize())
	return u, nil
}
