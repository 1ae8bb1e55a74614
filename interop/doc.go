// Package interop holds the interop suite: it runs the HTTP activity, in
// Temporal's test environment and on a Temporal dev server, against
// idempotency servers written outside this project (npm middlewares,
// installed by scripts/install-interop.sh into interop/node) and against the
// reference server of package testsuite in each of its dialects, through
// the same scenarios. SERVERS.md says exactly what each server answers; the
// suite prints the table scenario × server → outcome, requests, records
// (`make interop`).
//
// The long-running-operation rows (longrunning_test.go) call with
// Request.Follow, in both environments, routes of two mock APIs Microsoft
// publishes to test the Azure SDKs' pollers (the AutoRest test server and
// Spector with azure-http-specs; LRO-SERVERS.md says what each route
// answers), each with the worker's convention for its origin, and print
// the table route → outcome, polls, final status, and whether that is the
// end the route says.
//
// The webhook rows (webhooks_test.go) hold package webhooks' verifiers to
// the schemes' official npm libraries (standardwebhooks, svix, stripe, and
// GitHub's @octokit/webhooks-methods for HMAC set up as GitHub signs;
// node/webhooks.js drives them): deliveries each library signs must
// verify, and several hundred generated deliveries per library, valid and
// not, must get the library's verdict at the library's own clock, but for
// the differences the test pins and explains.
//
// The OAuth 2.0 rows (oauth2_test.go) run internal/credential's
// client-credentials Source against oidc-provider, an OpenID-certified
// authorization server (node/oauth-server.js), with 5 s tokens: every
// call of a run is authorized by the provider's introspection, with about
// one token request per lifetime and never two at once; a client removed
// mid-run gives a final credential error, not a retry storm.
//
// The SigV4 rows (sigv4_test.go) sign the same requests with
// internal/credential's SigV4 source (AWS's Go signer) and with AWS's
// JavaScript signer (@smithy/signature-v4), with and without a session
// token, and compare the Authorization headers; then send requests it
// signed to s3rver (a fake S3) and to a verifier that re-signs what it
// receives with the JavaScript signer (node/sigv4.js serves all three).
//
// The mutual-TLS rows (mtls_test.go) call, with a client certificate,
// Node's own https server with requestCert and rejectUnauthorized
// (node/mtls-server.js, built-in modules only), which refuses a
// certificate it does not trust by closing the connection without a TLS
// alert, in TLS 1.2 and 1.3: the refusal must end the workflow at the
// first attempt with a final CredentialUnavailable of known outcome.
//
// The check-keys rows (checkkeys_test.go) run the starter's check-keys,
// the binary, against both middlewares: a replay, and the key reused with
// a changed body refused (417, 422); told to read another header, each
// makes a second record.
//
// The rows of an API without keys (unkeyed_test.go) run workflows.Call
// against json-server (npm), a plain REST server that makes a record of
// every POST and knows nothing of idempotency keys, behind Toxiproxy,
// which loses answers after json-server made the record and requests
// before it saw them: 30 calls with the key in the body, three ways.
// Plain retries must make duplicates (the baseline); a Reconcile.Lookup
// on the same origin exactly one record per call, the record json-server
// stores as each result; AtMostOnce no duplicate, each call succeeding or
// ending AwaitingDecision.
//
// The package has tests only.
package interop
