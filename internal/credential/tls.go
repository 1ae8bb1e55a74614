package credential

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// statEvery is how often, at most, the certificate and key files are
// checked for a rotation.
const statEvery = time.Second

// tlsSource is a client certificate read from PEM files, re-read when they
// change (see NewTLS).
type tlsSource struct {
	certFile, keyFile string
	f                 fields // how the files are named in errors
	roots             *x509.CertPool
	r                 Redactor
	now               func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	keyText []string       // the key's PEM text, as given to r
	stats   [2]os.FileInfo // of certFile and keyFile when cert was read
	checked time.Time      // the last stat
	// unused is why the files, changed since cert was read, could not be
	// used (nil: they were not changed, or were used).
	unused error
}

// NewTLS returns the client certificate of an origin that requires mutual
// TLS: certFile and keyFile are PEM files of the certificate (its chain may
// follow it) and of its private key; caFile, if not empty, is a PEM file of
// the certificate authorities trusted for the origin's server certificate
// (RootCAs; default: the system's). NewTLS refuses files that cannot be
// read or parsed, a key that does not match the certificate, and a
// certificate that has expired or is not yet valid.
//
// TLSConfig's GetClientCertificate checks the two files at most once a
// second and re-reads them when they changed, so a rotated certificate is
// presented on new connections without a restart (a pair that does not
// parse or match, as while the files are being rewritten one by one, is
// ignored until the next check: the certificate read before is kept). A
// handshake with a certificate that has expired since fails on the client
// before anything is sent, with an *Error naming Credential.CertFile and,
// if the files were changed since but could not be used, why.
//
// The private key's PEM text is given to r, so that a server echoing it
// cannot have it written anywhere.
func NewTLS(certFile, keyFile, caFile string, r Redactor) (TLSSource, error) {
	return NewTLSFor(Names{}, "", certFile, keyFile, caFile, r)
}

// NewTLSFor is NewTLS for the files of the fields part+"CertFile",
// part+"KeyFile" and part+"CAFile", named in its errors as n says: part ""
// for an origin's files, "TokenTLS." for its token requests'.
func NewTLSFor(n Names, part, certFile, keyFile, caFile string, r Redactor) (TLSSource, error) {
	f := fields{cert: n.Of(part + "CertFile"), key: n.Of(part + "KeyFile"), ca: n.Of(part + "CAFile")}
	switch {
	case certFile == "" && keyFile == "":
		return nil, tlsError(errors.New(f.cert + " and " + f.key + " are empty: set the PEM files of the client certificate and its private key"))
	case certFile == "":
		return nil, tlsError(errors.New(f.cert + " is empty but " + f.key + " is set: set both, the PEM files of the client certificate and its private key"))
	case keyFile == "":
		return nil, tlsError(errors.New(f.key + " is empty but " + f.cert + " is set: set both, the PEM files of the client certificate and its private key"))
	case r == nil:
		return nil, tlsError(errors.New("no Redactor: the private key could not be redacted"))
	}
	s := &tlsSource{certFile: certFile, keyFile: keyFile, f: f, r: r, now: time.Now}
	var err error
	if s.roots, err = CAPool(f.ca, caFile); err != nil {
		return nil, err
	}
	kp, err := s.load()
	if err != nil {
		return nil, err
	}
	s.cert, s.keyText, s.stats, s.checked = kp.cert, kp.keyText, kp.stats, s.now()
	return s, nil
}

// TLSConfig returns the TLS configuration of the origin's transport.
func (s *tlsSource) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		RootCAs:              s.roots,
		GetClientCertificate: s.clientCertificate,
	}
}

// Apply sets no header: it tells the redactor the private key in use
// again, since a keep-alive connection may serve requests for longer than
// RetainFor without a new handshake (where clientCertificate adds it).
func (s *tlsSource) Apply(context.Context, *http.Request, []byte) error {
	s.mu.Lock()
	keyText := s.keyText
	s.mu.Unlock()
	for _, k := range keyText {
		s.r.Add(k)
	}
	return nil
}

// clientCertificate is tls.Config.GetClientCertificate: the current
// certificate, re-read if its files changed.
func (s *tlsSource) clientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if now.Sub(s.checked) >= statEvery || now.Before(s.checked) {
		s.checked = now
		if s.changed() {
			kp, err := s.load()
			if s.unused = err; err == nil {
				s.cert, s.keyText, s.stats = kp.cert, kp.keyText, kp.stats
			}
		}
		// The key in use stays redacted however long it is used.
		for _, k := range s.keyText {
			s.r.Add(k)
		}
	}
	if leaf := s.cert.Leaf; now.After(leaf.NotAfter) {
		why := ""
		if s.unused != nil {
			why = fmt.Sprintf("; the files changed since but could not be used: %v", s.unused)
		}
		return nil, tlsError(fmt.Errorf("the client certificate in %s %s (serial %s) expired at %s: write a renewed certificate and key to %s and %s (they are re-read without a restart)%s", s.f.cert, s.certFile, leaf.SerialNumber, leaf.NotAfter.UTC().Format(time.RFC3339), s.f.cert, s.f.key, why))
	}
	return s.cert, nil
}

// changed reports whether the certificate or key file is another file, or
// was written, since they were read.
func (s *tlsSource) changed() bool {
	for i, name := range []string{s.certFile, s.keyFile} {
		fi, err := os.Stat(name)
		if err != nil {
			return false // being replaced: keep the certificate read before
		}
		old := s.stats[i]
		if !os.SameFile(old, fi) || !fi.ModTime().Equal(old.ModTime()) || fi.Size() != old.Size() {
			return true
		}
	}
	return false
}

// keyPair is what load read: the certificate, the key's PEM text as given
// to the redactor, and the two files' stats.
type keyPair struct {
	cert    *tls.Certificate
	keyText []string
	stats   [2]os.FileInfo
}

// load reads and checks the certificate and key files.
func (s *tlsSource) load() (keyPair, error) {
	var stats [2]os.FileInfo
	files := []struct{ field, name, what string }{{s.f.cert, s.certFile, "the client certificate's PEM file"}, {s.f.key, s.keyFile, "its private key's PEM file"}}
	for i, f := range files {
		fi, err := os.Stat(f.name)
		if err != nil {
			return keyPair{}, tlsError(fmt.Errorf("%s: %w: write the path of %s", f.field, err, f.what))
		}
		stats[i] = fi
	}
	var pems [2][]byte
	for i, f := range files {
		b, err := os.ReadFile(f.name)
		if err != nil {
			return keyPair{}, tlsError(fmt.Errorf("%s: %w: let the worker's user read %s", f.field, err, f.what))
		}
		pems[i] = b
	}
	certPEM, keyPEM := pems[0], pems[1]
	keyText := s.redactKey(keyPEM)
	if len(keyText) < 2 {
		return keyPair{}, tlsError(fmt.Errorf("%s %s holds no PEM private key (want a -----BEGIN PRIVATE KEY----- block, or EC or RSA PRIVATE KEY)", s.f.key, s.keyFile))
	}
	if b, _ := pem.Decode(certPEM); b == nil || b.Type != "CERTIFICATE" {
		return keyPair{}, tlsError(fmt.Errorf("%s %s does not start with a PEM certificate (want a -----BEGIN CERTIFICATE----- block, its chain after it)", s.f.cert, s.certFile))
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// The standard library's message names no secret: it says which
		// block does not parse or that the key does not match.
		return keyPair{}, tlsError(fmt.Errorf("%s %s and %s %s: %w (want the private key of that certificate)", s.f.key, s.keyFile, s.f.cert, s.certFile, err))
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return keyPair{}, tlsError(fmt.Errorf("%s %s: %w", s.f.cert, s.certFile, err))
		}
	}
	now := s.now()
	if leaf := cert.Leaf; now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		return keyPair{}, tlsError(fmt.Errorf("the certificate in %s %s (serial %s) is valid from %s to %s only: write a current certificate and its key to %s and %s", s.f.cert, s.certFile, leaf.SerialNumber, leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339), s.f.cert, s.f.key))
	}
	return keyPair{cert: &cert, keyText: keyText, stats: stats}, nil
}

// redactKey gives the private key's PEM text to the redactor: the file as
// written, and each key block's base64 body on one line (as a server
// might echo it). It returns what it gave; fewer than two: no key block.
func (s *tlsSource) redactKey(keyPEM []byte) []string {
	var text []string
	if t := strings.TrimSpace(string(keyPEM)); t != "" {
		text = append(text, t)
	}
	for rest := keyPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if strings.Contains(b.Type, "PRIVATE KEY") {
			text = append(text, base64.StdEncoding.EncodeToString(b.Bytes))
		}
	}
	for _, t := range text {
		s.r.Add(t)
	}
	return text
}

func tlsError(err error) *Error { return &Error{Scheme: "mtls", Err: err} }

// fields are the names of a TLSSource's files in its errors.
type fields struct{ cert, key, ca string }

// CAPool reads caFile, a PEM file of certificate authorities named field
// in errors (Credential.CAFile, say); nil for "" (the system's).
func CAPool(field, caFile string) (*x509.CertPool, error) {
	if caFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, tlsError(fmt.Errorf("%s: %w", field, err))
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, tlsError(fmt.Errorf("%s %s holds no PEM certificate (want -----BEGIN CERTIFICATE----- blocks)", field, caFile))
	}
	return pool, nil
}

// refusalAlerts are the TLS alerts a server sends when it refuses the
// client certificate (RFC 8446 §6.2).
var refusalAlerts = []string{"bad certificate", "unsupported certificate", "certificate revoked", "certificate expired", "certificate unknown", "unknown certificate authority", "access denied", "certificate required"}

// TLSRefusal returns err, an error of a request to an origin with a client
// certificate, as the *Error to report when the origin refused the
// certificate in the handshake (a TLS alert such as unknown certificate
// authority or certificate expired, or a silent close that DialTLS found
// to be a refusal), and nil for any other error; cert names the setting
// of the certificate ("Credential.CertFile"). With TLS 1.3 the refusal
// arrives after the client's side of the handshake is done, so the
// request may have been written already, but the server refused the
// connection before reading it: no handler received it.
func TLSRefusal(err error, cert string) *Error {
	var rs *refusedSilently
	if errors.As(err, &rs) {
		return rs.err
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "remote error" || op.Err == nil {
		return nil
	}
	if alert := refusalAlert(op); alert != "" {
		return tlsError(fmt.Errorf("the origin refused the client certificate of %s (TLS alert %q): check that the certificate is issued by a CA the origin trusts, is current, and is the one it expects", cert, alert))
	}
	return nil
}

// refused reports whether err is a refusal of the client certificate
// (see TLSRefusal).
func refused(err error) bool { return TLSRefusal(err, "") != nil }

// refusalAlert is the refusal alert op reports, or "".
func refusalAlert(op *net.OpError) string {
	if op.Op != "remote error" || op.Err == nil {
		return ""
	}
	alert := strings.TrimPrefix(op.Err.Error(), "tls: ")
	for _, a := range refusalAlerts {
		if alert == a {
			return alert
		}
	}
	return ""
}

// refusalReason says how the server refused the certificate in err (a
// refusal TLSRefusal finds).
func refusalReason(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		if alert := refusalAlert(op); alert != "" {
			return fmt.Sprintf("TLS alert %q", alert)
		}
	}
	return "it closed the connection without a TLS alert, and again on a connection that sent no request"
}
