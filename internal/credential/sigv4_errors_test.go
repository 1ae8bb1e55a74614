package credential

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/processcreds"
)

// TestSigV4ProviderErrorQuotesNoSecret: the AWS SDK's credential_process
// provider quotes the process's whole output when it is not valid JSON,
// secret access key and session token included, before anything could
// tell them to the redactor: that text reaches no error.
func TestSigV4ProviderErrorQuotesNoSecret(t *testing.T) {
	const secret, session = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "FwoGZXIvYXdzEBYaDLongSessionToken0123456789"
	out := fmt.Sprintf(`{"Version":1,"AccessKeyId":"AKIAEXAMPLE","SecretAccessKey":%q,"SessionToken":%q,}`, secret, session)
	p := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{}, &processcreds.ProviderError{Err: fmt.Errorf("parse failed of process output: %s, error: %w", out, errors.New("invalid character '}'"))}
	})
	src, err := NewSigV4("execute-api", "eu-west-1", p, &secrets{}, Names{})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "https://api.example/x", nil)
	err = src.Apply(context.Background(), req, nil)
	if err == nil {
		t.Fatal("Apply = nil, want an *Error")
	}
	for _, s := range []string{secret, session} {
		for i := 0; i+8 <= len(s); i++ {
			if strings.Contains(err.Error(), s[i:i+8]) {
				t.Fatalf("the error holds a piece of a secret (%q): %v", s[i:i+8], err)
			}
		}
	}
	if !strings.Contains(err.Error(), "credential_process") {
		t.Errorf("the error does not name the credential_process: %v", err)
	}
}
