package itest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
)

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on.
//
// It binds port 0, then connects to it and closes the accepted side first,
// which leaves the port in TIME_WAIT: Linux does not hand it out again for
// port-0 binds for about a minute, while a server (which sets SO_REUSEADDR,
// as Go's listeners do) can still bind it explicitly. That makes it much less
// likely than a plain bind-and-close that two callers get the same port.
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts returns n distinct free ports on 127.0.0.1, as [FreePort] picks them.
func FreePorts(n int) ([]int, error) {
	var (
		ports = make([]int, 0, n)
		held  []net.Listener
	)
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("itest: no free port: %w", err)
		}
		held = append(held, l) // held until all are picked: no duplicates
		addr := l.Addr().(*net.TCPAddr)
		c, err := net.DialTCP("tcp", nil, addr)
		if err != nil {
			return nil, fmt.Errorf("itest: no free port: %w", err)
		}
		s, err := l.Accept()
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("itest: no free port: %w", err)
		}
		_ = s.Close() // server side first: the port goes to TIME_WAIT
		_ = c.Close()
		ports = append(ports, addr.Port)
	}
	return ports, nil
}

// FreePortsIn returns n distinct TCP ports in [lo, hi] that were free on
// 127.0.0.1 a moment ago, for a program that cannot take just any port (one
// that must fit a smallint, say). Unlike [FreePorts] it binds random ports
// of the range explicitly, giving up after 1000 tries. All n listeners are
// held open until all are chosen, so the ports differ from each other;
// another process may still take one before it is used, which the caller
// sees as a start-up failure.
func FreePortsIn(lo, hi, n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, fmt.Errorf("itest: found only %d free ports in [%d, %d]", len(ports), lo, hi)
		}
		port := lo + rand.IntN(hi-lo+1)
		l, err := net.Listen("tcp", HostPort(port))
		if err != nil {
			continue
		}
		ls = append(ls, l)
		ports = append(ports, port)
	}
	return ports, nil
}

// HostPort returns "127.0.0.1:port".
func HostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
