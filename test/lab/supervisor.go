package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// detachedEnv marks the background supervisor started by `up --detach`.
const detachedEnv = "FEDFAILOVER_LAB_SUPERVISOR"

// Supervise starts the lab and keeps its controllers running until a
// signal arrives, then tears everything down.
func Supervise(ctx context.Context, o Options, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	o.Logf = func(format string, args ...any) {
		_, _ = fmt.Fprintf(out, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	l, err := Up(ctx, o)
	if err != nil {
		return err
	}
	if s, err := l.Status(); err == nil {
		s.Print(out)
	}
	_, _ = fmt.Fprintf(out, "\nexport KUBECONFIG=%s   # contexts: host, %v\n", l.Kubeconfig(), l.Members())
	if os.Getenv(detachedEnv) == "" {
		_, _ = fmt.Fprintln(out, "lab running; press Ctrl-C to stop it")
	}
	<-ctx.Done()
	_, _ = fmt.Fprintln(out, "stopping the lab")
	return l.Down(context.Background())
}

// StartDetached re-executes this command with args (less --detach) as a
// background supervisor in its own session and returns once the lab is ready, streaming its progress meanwhile.
func StartDetached(dir string, args []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(dir, SupervisorLog)
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var childArgs []string
	for _, a := range args {
		if a != "--detach" && a != "--detach=true" {
			childArgs = append(childArgs, a)
		}
	}
	child := exec.Command(self, childArgs...)
	child.Stdout, child.Stderr = logf, logf
	child.Env = append(os.Environ(), detachedEnv+"=1")
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	reader, err := os.Open(logPath)
	if err != nil {
		return err
	}
	defer func() { _ = reader.Close() }()
	for {
		_, _ = io.Copy(os.Stdout, reader)
		select {
		case err := <-exited:
			_, _ = io.Copy(os.Stdout, reader)
			if err == nil {
				return errors.New("lab supervisor exited before the lab was ready")
			}
			return fmt.Errorf("lab supervisor exited before the lab was ready: %w", err)
		case <-time.After(300 * time.Millisecond):
		}
		if st, err := LoadState(dir); err == nil && st.Ready && st.SupervisorPID == child.Process.Pid {
			time.Sleep(300 * time.Millisecond) // let the status table reach the log
			_, _ = io.Copy(os.Stdout, reader)
			fmt.Printf("lab supervisor running in the background (pid %d, log %s); stop it with `fedfailover-lab down --dir %s`\n",
				child.Process.Pid, logPath, dir)
			return nil
		}
	}
}
