package credential

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"
)

// refusalWait bounds how long a connection's failed write waits for its
// reader to see why (see refusalConn.Write): the reader of an HTTP/1.1
// connection is always reading, so it returns as soon as the connection
// breaks; the bound only matters if nothing reads.
const refusalWait = 2 * time.Second

// DialTLS returns the DialTLSContext of the transport of an origin that
// requires a client certificate, cfg being its TLS configuration (from a
// TLSSource): it dials with dial (nil: a net.Dialer), completes the
// handshake within timeout (0: the context's deadline only) and returns a
// connection that speaks HTTP/1.1.
//
// Why: with TLS 1.3 the client's side of the handshake is done before the
// server has checked the certificate, so the request is written at once;
// a server refusing the certificate sends its alert and closes the
// connection, and a body still being written then fails with "connection
// reset by peer", an error that says neither that the certificate was
// refused nor that no handler read the request. A write to a connection
// returned here that fails waits for the connection's reader, and reports
// the server's refusal alert with the write error when the reader got one
// (so that TLSRefusal finds it). HTTP/2 is not negotiated: the transport
// speaks it only on a *tls.Conn.
func DialTLS(dial func(ctx context.Context, network, addr string) (net.Conn, error), cfg *tls.Config, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c := cfg.Clone()
		// The transport adds "h2" to its TLSClientConfig, shared with
		// cfg: only HTTP/1.1 is spoken on this connection.
		c.NextProtos = []string{"http/1.1"}
		if c.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				host = addr
			}
			c.ServerName = host
		}
		tc := tls.Client(raw, c)
		hctx := ctx
		if timeout > 0 {
			var cancel context.CancelFunc
			hctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		if err := tc.HandshakeContext(hctx); err != nil {
			raw.Close()
			return nil, err
		}
		return &refusalConn{Conn: tc, read: make(chan struct{})}, nil
	}
}

// refusalConn is a client-certificate connection whose failed writes
// report the server's refusal alert, if its reader got one (see DialTLS).
type refusalConn struct {
	*tls.Conn
	once    sync.Once
	read    chan struct{} // closed when a Read has failed, with readErr
	readErr error
}

// Read reads from the connection, keeping its first error.
func (c *refusalConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(func() {
			c.readErr = err
			close(c.read)
		})
	}
	return n, err
}

// Write writes to the connection; when that fails it waits (at most
// refusalWait) for the reader's error, and returns the server's refusal
// alert joined to the write error if that is what the reader got.
func (c *refusalConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err == nil {
		return n, nil
	}
	t := time.NewTimer(refusalWait)
	defer t.Stop()
	select {
	case <-c.read:
		if TLSRefusal(c.readErr) != nil {
			return n, errors.Join(c.readErr, err)
		}
	case <-t.C:
	}
	return n, err
}
