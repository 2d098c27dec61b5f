package lab

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// TestIsolationHelperDial is not a test: run by TestIsolation inside the
// namespace, it dials the address, sends a line and prints the echo.
func TestIsolationHelperDial(t *testing.T) {
	addr := os.Getenv("LAB_ISOLATION_DIAL")
	if addr == "" {
		return
	}
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		fmt.Println("DIAL-FAILED", err)
		return
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintln(c, "ping")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		fmt.Println("READ-FAILED", err)
		return
	}
	fmt.Println("GOT", strings.TrimSpace(line))
}

// TestIsolation checks that a process in the namespace reaches a lab
// address only while it is forwarded.
func TestIsolation(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root (network namespaces): run the tests as root, as CI does")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					fmt.Fprint(c, "echo "+line)
				}
			}()
		}
	}()
	addr := ln.Addr().String()

	iso, err := NewIsolation(fmt.Sprintf("fflab-test-%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := iso.Close(); err != nil {
			t.Error(err)
		}
	}()
	dial := func() string {
		t.Helper()
		cmd := iso.Command(os.Args[0], "-test.run=^TestIsolationHelperDial$")
		cmd.Env = append(os.Environ(), "LAB_ISOLATION_DIAL="+addr)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper in namespace: %v: %s", err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "GOT") || strings.Contains(l, "FAILED") {
				return l
			}
		}
		t.Fatalf("helper printed nothing useful: %s", out)
		return ""
	}

	if got := dial(); !strings.HasPrefix(got, "DIAL-FAILED") {
		t.Fatalf("before Forward: %q, want the namespace cut off", got)
	}
	if err := iso.Forward(addr); err != nil {
		t.Fatal(err)
	}
	if got := dial(); got != "GOT echo ping" {
		t.Fatalf("forwarded: %q, want the echo", got)
	}

	// Entering and leaving the namespace leaves this process usable.
	inside, err := iso.listenInside("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_ = inside.Close()
	iso.Cut(addr)
	if iso.Forwarded(addr) {
		t.Fatal("still forwarded after Cut")
	}
	if got := dial(); !strings.HasPrefix(got, "DIAL-FAILED") {
		t.Fatalf("after Cut: %q, want the namespace cut off", got)
	}
	if err := iso.Forward(addr); err != nil {
		t.Fatal(err)
	}
	if got := dial(); got != "GOT echo ping" {
		t.Fatalf("forwarded again: %q, want the echo", got)
	}
}
