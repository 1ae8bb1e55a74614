package credential

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestTLSKeyReaddedWithEveryRequest: a keep-alive connection can live
// longer than RetainFor without a new handshake; the private key in use is
// told to the redactor with every request (Apply), not only at handshakes.
func TestTLSKeyReaddedWithEveryRequest(t *testing.T) {
	ca, serverCA := newMTLSCA(t, "trusted"), newMTLSCA(t, "server")
	certFile, keyFile, caFile, keyPEM := mtlsFiles(t, ca, serverCA, 1, time.Now().Add(time.Hour))
	r := &secrets{}
	ts, err := NewTLS(certFile, keyFile, caFile, r)
	if err != nil {
		t.Fatal(err)
	}
	src, ok := ts.(Source)
	if !ok {
		t.Fatal("the TLS source is not a Source: its key is told to the redactor only at handshakes")
	}
	body := mtlsPEMBody(t, keyPEM)
	before := r.count(body)
	for range 3 {
		req, _ := http.NewRequest(http.MethodPost, "https://bank.example/pay", nil)
		if err := src.Apply(context.Background(), req, nil); err != nil {
			t.Fatal(err)
		}
		if len(req.Header) != 0 {
			t.Errorf("Apply set headers %v, want none", req.Header)
		}
	}
	if got := r.count(body) - before; got != 3 {
		t.Errorf("the key was added %d times in 3 requests, want 3", got)
	}
}
