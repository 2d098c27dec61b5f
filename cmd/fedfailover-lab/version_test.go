package main

import (
	"bytes"
	"testing"

	"github.com/fedfailover/fedfailover/internal/version"
)

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	cmd := rootCmd()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if want := version.Line("fedfailover-lab") + "\n"; out.String() != want {
		t.Errorf("--version printed %q, want %q", out.String(), want)
	}
}
