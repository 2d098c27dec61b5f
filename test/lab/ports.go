package lab

import (
	"fmt"
	"net"
	"strconv"
)

// PortAllocator hands out free loopback TCP ports and never the same one
// twice, so that components started together do not collide.
type PortAllocator struct {
	used map[int]bool
}

// NewPortAllocator returns an empty allocator.
func NewPortAllocator() *PortAllocator {
	return &PortAllocator{used: map[int]bool{}}
}

// Free returns a port that was free on 127.0.0.1 a moment ago. The kernel
// picks it; the allocator only remembers it so it is not handed out again.
func (a *PortAllocator) Free() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("allocate loopback port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !a.used[port] {
			a.used[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("allocate loopback port: no unused port after 50 tries")
}

// Claim reserves an explicitly requested port and fails when something
// already listens on it or it was handed out before.
func (a *PortAllocator) Claim(port int) error {
	if port <= 0 || port > 65535 {
		return fmt.Errorf("port %d out of range", port)
	}
	if a.used[port] {
		return fmt.Errorf("port %d requested twice", port)
	}
	if err := CheckPortFree(port); err != nil {
		return err
	}
	a.used[port] = true
	return nil
}

// CheckPortFree fails with a clear message when 127.0.0.1:port is taken.
func CheckPortFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d on 127.0.0.1 is in use (choose another --base-port or stop what listens there): %w", port, err)
	}
	return l.Close()
}
