package credential

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The timing of the check that a silent close is a refusal (see
// dialer.probe).
const (
	// probeDial bounds the check's connection and handshake.
	probeDial = 3 * time.Second
	// probeWait is how long the check waits, after its handshake, for
	// the server to close the connection: a server that accepted the
	// certificate waits for a request far longer (seconds to minutes
	// before an idle or header timeout), one that refuses it closes at
	// once.
	probeWait = time.Second
)

// refusalWait bounds how long a connection's failed write waits for its
// reader to see why (see refusalConn.Write): the reader of an HTTP/1.1
// connection is always reading, so it returns as soon as the connection
// breaks, or once it has checked a silent close (probeDial + probeWait at
// most); the bound only matters if nothing reads.
const refusalWait = probeDial + probeWait + time.Second

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
//
// Many servers refuse a certificate without an alert: they close the
// connection (Node's https server with requestCert and
// rejectUnauthorized; many load balancers), during the handshake (TLS
// 1.2: the handshake fails) or right after it (TLS 1.3, and Node's TLS
// 1.2: the request may have been written, never read). Such a close, when
// the server asked for the certificate, one was presented and nothing came
// back on the connection, is checked on a new connection that sends no
// request (probe): when the server closes that one too, silently or with
// a refusal alert, the certificate is refused and the error of the first
// carries a refusal that TLSRefusal finds; when the server keeps it open,
// the certificate was accepted and the error is left as it is (the
// server closed the first connection for another reason, maybe after
// reading the request). A failed handshake that is no refusal is a
// *HandshakeError: nothing was sent. cert names the setting of the client
// certificate in a refusal's error ("Credential.CertFile").
func DialTLS(dial func(ctx context.Context, network, addr string) (net.Conn, error), cfg *tls.Config, timeout time.Duration, cert string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	d := &dialer{dial: dial, cfg: cfg, timeout: timeout, cert: cert}
	return d.dialTLS
}

// dialer is DialTLS's: one per origin transport.
type dialer struct {
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	cfg     *tls.Config
	timeout time.Duration
	cert    string // DialTLS's

	mu     sync.Mutex
	probes map[string]*probeFlight // by address: the check running
}

// probeFlight is one check of a silent close; done is closed when refusal
// is set (nil: not refused).
type probeFlight struct {
	done    chan struct{}
	refusal error
}

// handshakeState is what one connection's handshake showed of the client
// certificate.
type handshakeState struct {
	// asked: the server asked for a client certificate.
	asked atomic.Bool
	// presented: a certificate was sent in answer.
	presented atomic.Bool
}

// config is d.cfg for one connection to addr, recording in st what the
// handshake does with the client certificate.
func (d *dialer) config(addr string, st *handshakeState) *tls.Config {
	c := d.cfg.Clone()
	// The transport adds "h2" to its TLSClientConfig, shared with cfg:
	// only HTTP/1.1 is spoken on this connection.
	c.NextProtos = []string{"http/1.1"}
	if c.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		c.ServerName = host
	}
	get, certs := c.GetClientCertificate, c.Certificates
	c.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
		st.asked.Store(true)
		var cert *tls.Certificate
		if get != nil {
			var err error
			if cert, err = get(cri); err != nil {
				return nil, err
			}
		} else {
			cert = chooseCertificate(cri, certs)
		}
		st.presented.Store(cert != nil && len(cert.Certificate) > 0)
		return cert, nil
	}
	return c
}

// chooseCertificate is what crypto/tls does with Config.Certificates when
// GetClientCertificate is nil: the first the server supports, else none.
func chooseCertificate(cri *tls.CertificateRequestInfo, certs []tls.Certificate) *tls.Certificate {
	for i := range certs {
		if cri.SupportsCertificate(&certs[i]) == nil {
			return &certs[i]
		}
	}
	return &tls.Certificate{}
}

// handshake dials addr and completes the TLS handshake, recording in st
// what it did with the client certificate.
func (d *dialer) handshake(ctx context.Context, network, addr string, timeout time.Duration, st *handshakeState) (*tls.Conn, net.Conn, error) {
	raw, err := d.dial(ctx, network, addr)
	if err != nil {
		return nil, nil, err
	}
	tc := tls.Client(raw, d.config(addr, st))
	hctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if err := tc.HandshakeContext(hctx); err != nil {
		raw.Close()
		return nil, raw, err
	}
	return tc, raw, nil
}

func (d *dialer) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	st := &handshakeState{}
	tc, raw, err := d.handshake(ctx, network, addr, d.timeout, st)
	switch {
	case err == nil:
		return &refusalConn{Conn: tc, d: d, network: network, addr: addr, st: st, read: make(chan struct{})}, nil
	case raw == nil:
		return nil, err // the dial itself failed
	case refused(err):
		return nil, err
	case st.presented.Load() && closedSilently(err):
		if r := d.probe(ctx, network, addr); r != nil {
			return nil, errors.Join(r, err)
		}
	}
	return nil, &HandshakeError{Addr: addr, Err: err}
}

// HandshakeError is a TLS handshake with an origin that requires a client
// certificate that failed for a reason other than a refusal of the
// certificate (DialTLS): the connection was not made, nothing was sent on
// it.
type HandshakeError struct {
	Addr string
	Err  error
}

func (e *HandshakeError) Error() string {
	return fmt.Sprintf("TLS handshake with %s: %v", e.Addr, e.Err)
}

func (e *HandshakeError) Unwrap() error { return e.Err }

// closedSilently reports whether err is the server closing the connection
// without a word: an end of stream or a reset, no TLS alert.
func closedSilently(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// probe checks whether the server at addr refuses the client certificate
// (see DialTLS), one check at a time per address (the attempts that find
// a silent close at once share it), within ctx's deadline and probeDial +
// probeWait. It returns the refusal's error (see TLSRefusal), or nil when
// the server accepted the certificate or the check could not tell.
func (d *dialer) probe(ctx context.Context, network, addr string) error {
	d.mu.Lock()
	f := d.probes[addr]
	if f == nil {
		f = &probeFlight{done: make(chan struct{})}
		if d.probes == nil {
			d.probes = map[string]*probeFlight{}
		}
		d.probes[addr] = f
		d.mu.Unlock()
		// Not cancelled with the caller: others may wait for it.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeDial+probeWait)
		f.refusal = d.check(pctx, network, addr)
		cancel()
		d.mu.Lock()
		delete(d.probes, addr)
		d.mu.Unlock()
		close(f.done)
		return f.refusal
	}
	d.mu.Unlock()
	select {
	case <-f.done:
		return f.refusal
	case <-ctx.Done():
		return nil
	}
}

// check is one probe: a new connection that sends no request.
func (d *dialer) check(ctx context.Context, network, addr string) error {
	st := &handshakeState{}
	tc, raw, err := d.handshake(ctx, network, addr, probeDial, st)
	if err != nil {
		if raw == nil {
			return nil // not reached: cannot tell
		}
		if ce := TLSRefusal(err, d.cert); ce != nil {
			return ce
		}
		if st.presented.Load() && closedSilently(err) {
			return silentRefusal(d.cert)
		}
		return nil
	}
	defer tc.Close()
	if !st.presented.Load() {
		return nil // no certificate asked for, or none sent: not about it
	}
	dl := time.Now().Add(probeWait)
	if cdl, ok := ctx.Deadline(); ok && cdl.Before(dl) {
		dl = cdl
	}
	_ = tc.SetReadDeadline(dl)
	var b [1]byte
	n, err := tc.Read(b[:])
	switch {
	case n > 0 || err == nil:
		return nil // the server said something: not a silent refusal
	case refused(err):
		return TLSRefusal(err, d.cert)
	case closedSilently(err):
		return silentRefusal(d.cert)
	}
	return nil // still open at the deadline: the certificate was accepted
}

// refusedSilently marks the refusal DialTLS inferred from silent closes.
type refusedSilently struct{ err *Error }

func (r *refusedSilently) Error() string { return r.err.Error() }
func (r *refusedSilently) Unwrap() error { return r.err }

func silentRefusal(cert string) error {
	return &refusedSilently{tlsError(fmt.Errorf("the origin closed the connection without a TLS alert right after it received the client certificate of %s, and did so again on a new connection that sent no request: it refuses that certificate; check that the certificate is issued by a CA the origin trusts, is current, and is the one it expects", cert))}
}

// refusalConn is a client-certificate connection whose failed writes
// report the server's refusal alert, if its reader got one, and whose
// first failed read, when the server closed it silently before sending
// anything, is checked for a refusal (see DialTLS).
type refusalConn struct {
	*tls.Conn
	d             *dialer
	network, addr string
	st            *handshakeState
	got           atomic.Bool // a read returned bytes
	once          sync.Once
	read          chan struct{} // closed when a Read has failed, with readErr
	readErr       error
}

// Read reads from the connection, keeping its first error, joined to the
// refusal a silent close stands for.
func (c *refusalConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.got.Store(true)
	}
	if err != nil {
		c.once.Do(func() {
			if !c.got.Load() && c.st.presented.Load() && closedSilently(err) {
				if r := c.d.probe(context.Background(), c.network, c.addr); r != nil {
					err = errors.Join(r, err)
				}
			}
			c.readErr = err
			close(c.read)
		})
	}
	return n, err
}

// Write writes to the connection; when that fails it waits (at most
// refusalWait) for the reader's error, and returns the server's refusal
// joined to the write error if that is what the reader got.
func (c *refusalConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err == nil {
		return n, nil
	}
	t := time.NewTimer(refusalWait)
	defer t.Stop()
	select {
	case <-c.read:
		if refused(c.readErr) {
			return n, errors.Join(c.readErr, err)
		}
	case <-t.C:
	}
	return n, err
}
