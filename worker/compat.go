package main

import (
	"errors"
	"net/http"

	"github.com/idemhttp/temporal-idempotent-http/activities"
)

// setCredentials sets *dst, activities.Config.Credentials, to creds. It
// takes both types the field has had: map[string]activities.Credential,
// and map[string]http.Header before issue 32's core change landed (then
// only the Header part can be set). Once both are merged, replace the
// call with ac.Credentials = creds and delete this file.
func setCredentials(dst any, creds map[string]activities.Credential) error {
	switch d := dst.(type) {
	case *map[string]activities.Credential:
		*d = creds
	case *map[string]http.Header:
		for o, c := range creds {
			if c.HeaderFiles != nil || c.OAuth2 != nil || c.CertFile != "" || c.SigV4 != nil {
				return errors.New("origin " + o + ": this build's activities.Config.Credentials takes headers only")
			}
			if *d == nil {
				*d = map[string]http.Header{}
			}
			(*d)[o] = c.Header
		}
	default:
		return errors.New("activities.Config.Credentials has a type the worker does not know")
	}
	return nil
}
