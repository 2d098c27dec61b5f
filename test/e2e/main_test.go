//go:build e2e

// Package e2e holds the baselines: what Kubernetes and kubefed do on their
// own, in the lab, with no fedfailover operator running. They are the
// "before" of every benchmark. Run with:
//
//	go test -tags e2e -timeout 30m -v ./test/e2e/...
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fedfailover/fedfailover/test/lab"
)

// theLab is shared by all baselines: starting it costs most of a minute.
var theLab *lab.Lab

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	binDir := os.Getenv("LAB_BIN_DIR")
	if binDir == "" {
		binDir = lab.DefaultBinDir()
	}
	// Fail loudly, never skip, when the lab binaries are missing.
	if err := lab.CheckBinaries(binDir); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: e2e baselines need the lab binaries:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "fedfailover-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	l, err := lab.Up(ctx, lab.Options{
		Dir: filepath.Join(dir, "lab"), BinDir: binDir, Members: 2, Nodes: 3,
		Logf: func(f string, a ...any) {
			fmt.Printf("%s "+f+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: lab did not start:", err)
		return 1
	}
	theLab = l
	fmt.Printf("BASELINE lab-startup seconds=%.1f\n", time.Since(start).Seconds())
	if s, err := l.Status(); err == nil {
		s.Print(os.Stdout)
	}
	// Tear down on interrupt too: the lab must not outlive the test binary.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "interrupted: tearing the lab down")
		_ = l.Down(context.Background())
		os.Exit(2)
	}()
	code := m.Run()
	if code != 0 {
		fmt.Println("--- lab diagnosis after a failure ---")
		l.Diagnose(os.Stdout, 40)
	}
	if err := l.Down(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "lab teardown:", err)
		code = 1
	}
	_ = os.RemoveAll(dir)
	return code
}
