package credential

// Names says how the errors of one origin's credential
// (activities.Credential) name its settings, at New and at run time. The
// zero Names names them as Go code sets them ("Credential.CertFile"); a
// loader that read them from a file names the file's keys instead, where
// they are written ("tls.cert_file (origins.toml:9:1)"), so that an error
// says what to change in the place the person changes it. The texts of
// the errors are this package's either way: only the names differ.
type Names struct {
	// Credential names the credential as a whole, at the start of an
	// error at New ("": Config.Credentials[ORIGIN], as Go code sets it).
	Credential string
	// Fields names fields by their path in activities.Credential
	// ("OAuth2.ClientID", "CertFile", "TokenTLS.CAFile",
	// "Header[Authorization]", "HeaderFiles[X-Api-Key]"); a field not in
	// it is "Credential." and its path.
	Fields map[string]string
}

// Of names the field at path in a sentence: "Credential.OAuth2.ClientID"
// by default.
func (n Names) Of(path string) string {
	if s, ok := n.Fields[path]; ok {
		return s
	}
	return "Credential." + path
}

// head names the field at path at the start of an error that the caller
// prefixes with the credential's own name: the path itself
// ("HeaderFiles[X-Api-Key]", after "Config.Credentials[ORIGIN].") by
// default.
func (n Names) head(path string) string {
	if s, ok := n.Fields[path]; ok {
		return s
	}
	return path
}
