package lab

import (
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
)

// Isolation is a network namespace for a process under test (the manager)
// that reaches the lab only through forwarders the lab owns. Each forwarder
// listens inside the namespace on the same loopback address a lab API server
// has outside it, so kubeconfigs, KubeFedCluster endpoints and certificates
// work unchanged, while cutting a forwarder cuts only the isolated process:
// kubefed and the tests keep their own connections.
type Isolation struct {
	// Name is the network namespace (ip netns).
	Name string

	mu    sync.Mutex
	links map[string]*link // by address
}

// NewIsolation creates the network namespace name (replacing a leftover one
// of an earlier run) with its loopback up. It needs root and iproute2.
func NewIsolation(name string) (*Isolation, error) {
	_ = exec.Command("ip", "netns", "delete", name).Run() // a leftover of a killed run
	for _, args := range [][]string{
		{"netns", "add", name},
		{"-n", name, "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return &Isolation{Name: name, links: map[string]*link{}}, nil
}

// Command runs bin inside the namespace.
func (i *Isolation) Command(bin string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", i.Name, bin}, args...)...)
}

// Forward makes addr ("127.0.0.1:port") inside the namespace reach addr
// outside it. Forwarding an address already forwarded is a no-op.
func (i *Isolation) Forward(addr string) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if _, ok := i.links[addr]; ok {
		return nil
	}
	ln, err := i.listenInside(addr)
	if err != nil {
		return err
	}
	l := &link{addr: addr, ln: ln, conns: map[net.Conn]struct{}{}}
	i.links[addr] = l
	go l.serve()
	return nil
}

// Cut drops the forwarder of addr and resets its open connections: the
// isolated process sees that endpoint unreachable (connection refused on new
// dials) until Forward is called again.
func (i *Isolation) Cut(addr string) {
	i.mu.Lock()
	l := i.links[addr]
	delete(i.links, addr)
	i.mu.Unlock()
	if l != nil {
		l.close()
	}
}

// Forwarded reports whether addr is currently forwarded.
func (i *Isolation) Forwarded(addr string) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	_, ok := i.links[addr]
	return ok
}

// Close cuts every forwarder and deletes the namespace.
func (i *Isolation) Close() error {
	i.mu.Lock()
	links := i.links
	i.links = map[string]*link{}
	i.mu.Unlock()
	for _, l := range links {
		l.close()
	}
	if out, err := exec.Command("ip", "netns", "delete", i.Name).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns delete %s: %w: %s", i.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// listenInside opens a listening socket in the namespace.
func (i *Isolation) listenInside(addr string) (net.Listener, error) {
	ln, err := inNetns(i.Name, func() (net.Listener, error) { return net.Listen("tcp", addr) })
	if err != nil {
		return nil, fmt.Errorf("listening on %s in %s: %w", addr, i.Name, err)
	}
	return ln, nil
}

// link forwards one address; dials happen in the lab's own namespace.
type link struct {
	addr string
	ln   net.Listener

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func (l *link) serve() {
	for {
		in, err := l.ln.Accept()
		if err != nil {
			return
		}
		go l.pipe(in)
	}
}

func (l *link) pipe(in net.Conn) {
	out, err := net.Dial("tcp", l.addr)
	if err != nil {
		_ = in.Close()
		return
	}
	if !l.track(in, out) {
		_ = in.Close()
		_ = out.Close()
		return
	}
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(out, in)
	go cp(in, out)
	<-done
	_ = in.Close()
	_ = out.Close()
	<-done
	l.untrack(in, out)
}

func (l *link) track(cs ...net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	for _, c := range cs {
		l.conns[c] = struct{}{}
	}
	return true
}

func (l *link) untrack(cs ...net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range cs {
		delete(l.conns, c)
	}
}

// close stops accepting and resets every open connection (linger 0), so
// the isolated side sees the cut at once rather than at a TCP timeout.
func (l *link) close() {
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = map[net.Conn]struct{}{}
	l.mu.Unlock()
	_ = l.ln.Close()
	for c := range conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
}
