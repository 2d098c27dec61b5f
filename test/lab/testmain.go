package lab

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
)

// MainOptions describe the lab a test package's TestMain shares between its
// tests.
type MainOptions struct {
	// Name says whose lab it is in messages and names the temporary folder.
	Name string
	// Lab is the lab to start; Dir, BinDir and Logf are filled in.
	Lab Options
	// NeedRoot fails the run at once without root (network namespaces).
	NeedRoot bool
	// Setup runs once the lab is up and before the tests, with the run's
	// temporary folder; an error fails the run.
	Setup func(l *Lab, dir string) error
	// OnFailure runs after failed tests, before the teardown.
	OnFailure func(l *Lab, dir string)
	// KeepDirOnFailure leaves the temporary folder (logs, audit logs) after a
	// failed run and says where it is.
	KeepDirOnFailure bool
}

// RunTestMain starts the lab o describes, runs the package's tests on it and
// tears it down, also on an interrupt: the lab never outlives the test
// binary. It fails loudly, never skips, when the lab's binaries are missing.
// Its result is the exit code for os.Exit.
func RunTestMain(m *testing.M, o MainOptions) int {
	ctrllog.SetLogger(logr.Discard())
	binDir := os.Getenv("LAB_BIN_DIR")
	if binDir == "" {
		binDir = DefaultBinDir()
	}
	if err := CheckBinaries(binDir); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %s need the lab binaries: %v\n", o.Name, err)
		return 1
	}
	if o.NeedRoot && os.Geteuid() != 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %s need root (network namespaces)\n", o.Name)
		return 1
	}
	dir, err := os.MkdirTemp("", "fedfailover-"+o.Name+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	start := time.Now()
	lo := o.Lab
	lo.Dir, lo.BinDir = filepath.Join(dir, "lab"), binDir
	lo.Logf = func(f string, a ...any) {
		fmt.Printf("%s "+f+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
	}
	l, err := Up(context.Background(), lo)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: lab did not start:", err)
		return 1
	}
	fmt.Printf("BASELINE lab-startup seconds=%.1f (%d members x %d nodes)\n", time.Since(start).Seconds(), lo.Members, lo.Nodes)
	if s, err := l.Status(); err == nil {
		s.Print(os.Stdout)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "interrupted: tearing the lab down")
		_ = l.Down(context.Background())
		os.Exit(2)
	}()
	code := 1
	if o.Setup == nil {
		code = m.Run()
	} else if err := o.Setup(l, dir); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
	} else {
		code = m.Run()
	}
	if code != 0 {
		fmt.Println("--- lab diagnosis after a failure ---")
		l.Diagnose(os.Stdout, 40)
		if o.OnFailure != nil {
			o.OnFailure(l, dir)
		}
	}
	if err := l.Down(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "lab teardown:", err)
		code = 1
	}
	if code != 0 && o.KeepDirOnFailure {
		fmt.Println("logs kept in", dir)
	} else {
		_ = os.RemoveAll(dir)
	}
	return code
}
