package defaults

import (
	"testing"
	"time"
)

func TestSet(t *testing.T) {
	d, neg, kept := time.Duration(0), -time.Second, 3*time.Second
	Set(&d, time.Minute)
	Set(&neg, time.Minute)
	Set(&kept, time.Minute)
	if d != time.Minute || neg != time.Minute || kept != 3*time.Second {
		t.Fatalf("durations = %v %v %v, want 1m 1m 3s", d, neg, kept)
	}
	i, q := 0, float32(2.5)
	Set(&i, 4)
	Set(&q, 50)
	if i != 4 || q != 2.5 {
		t.Fatalf("int %d float %v, want 4 2.5", i, q)
	}
	s, set := "", "x"
	String(&s, "def")
	String(&set, "def")
	if s != "def" || set != "x" {
		t.Fatalf("strings %q %q, want def x", s, set)
	}
	var now func() time.Time
	Clock(&now)
	if now == nil {
		t.Fatal("Clock left nil")
	}
}
