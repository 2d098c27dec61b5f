// Command fedfailover-demo plays fedfailover's story on the local federation
// (test/demo). `make demo` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fedfailover/fedfailover/test/demo"
	"github.com/fedfailover/fedfailover/test/lab"
)

func main() {
	var o demo.Options
	flag.StringVar(&o.Dir, "dir", ".lab", "lab directory")
	flag.StringVar(&o.BinDir, "bin-dir", "", "directory with the binaries `make tools` and `make build` produce (default <repo>/bin)")
	flag.BoolVar(&o.Keep, "keep", os.Getenv("KEEP") == "1", "leave the federation and the manager running (KEEP=1)")
	flag.Parse()
	if o.BinDir == "" {
		o.BinDir = lab.DefaultBinDir()
	}
	// Components log to their own files; the demo's output is its story.
	ctrl.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := demo.Run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}
