package managerproc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A real child process: Sample reads its memory and CPU, Kill ends it.
func TestStartSampleKill(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	// A busy shell loop: it uses CPU, so the sample can be checked.
	p, err := Start(Options{Bin: "/bin/sh", Args: []string{"-c", "echo started; while :; do :; done"}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var u Usage
	for {
		u, err = p.Sample()
		if err != nil {
			t.Fatal(err)
		}
		if u.CPU > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if u.CPU <= 0 || u.RSS <= 0 {
		t.Fatalf("usage %+v: want CPU and RSS above zero", u)
	}
	if exited, _ := p.Exited(); exited {
		t.Fatal("the process exited on its own")
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	exited, err := p.Exited()
	if !exited || err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("after Kill: exited=%v err=%v, want killed", exited, err)
	}
	out, _ := os.ReadFile(log)
	if !strings.Contains(string(out), "started") {
		t.Fatalf("log %q: want the child's output", out)
	}
}
