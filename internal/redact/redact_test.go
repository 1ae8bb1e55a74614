package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIsCredential (issue 30, item 3): one rule for header names and JSON
// member names, whatever their case and separators; the names that would
// hide business fields stay plain.
func TestIsCredential(t *testing.T) {
	credential := []string{
		// Header names.
		"Authorization", "authorization", "Proxy-Authorization", "Cookie", "Set-Cookie",
		"X-Api-Key", "x-api-key", "X-API-KEY", "Api-Key", "Apikey", "X_Api_Key", "X-Auth-Token",
		"X-Access-Token", "X-Amz-Security-Token", "Ocp-Apim-Subscription-Key", "X-Client-Secret",
		"X-Session-Id", "Private-Token", "X-Password", "X-Credential", "X-Access-Key", "X-Private-Key",
		"X-Client-Key", "X-Csrf-Token", "Www-Authenticate", "X-Auth-Key", "X-Auth", "XAPIKEY",
		// The ten names webhook bodies matched before, in any case.
		"client_secret", "secret", "password", "api_key", "apikey", "access_token",
		"refresh_token", "token", "authorization", "private_key", "CLIENT_SECRET", "Token",
		// camelCase, prefixed and joined spellings.
		"accessToken", "clientSecret", "secret_key", "idToken", "apiKey", "APIKey", "privateKey",
		"PRIVATE_KEY", "refreshToken", "sessionToken", "aws_secret_access_key", "SecretAccessKey",
		"webhook_signing_key", "encryptionKey", "passphrase", "basicAuth", "clientsecret",
		"accesstoken", "xapikey", "id-token", "client.secret", "sessionData", "session_id",
		"user_credentials", "nextPageToken", "token_type", "api_keys",
		// A key after authorization, authentication, functions, application
		// or transaction, run together or not; run-together session IDs.
		"X-Authorization-Key", "AuthenticationKey", "X-Functions-Key", "DD-APPLICATION-KEY",
		"application_key", "transactionKey", "transaction_key", "Sessionid", "JSESSIONID",
		"PHPSESSID", "sessionkey", "encryptionkey", "authorizationkey",
		// Card and sign-in secrets, as a name's last word, and their codes.
		"cvc", "card_cvc", "CVV", "cardCvv", "cvv2", "cvc2", "passcode", "smsPasscode", "pwd",
		"user_pwd", "otp", "sms_otp", "pin", "card_pin", "cardPin", "PIN", "pin_code",
		"otpCode", "security_code", "securityCode",
	}
	plain := []string{
		"X-Correlation-Id", "X-Request-Id", "Accept-Language", "Content-Language", "X-Note",
		"Prefer", "If-Match", "Traceparent", "X-Tenant", "Keyboard",
		// Business fields: a key that is no secret, a word that starts
		// with token, a count of tokens, a card payment's approval code.
		"idempotency_key", "Idempotency-Key", "idempotencyKey", "key", "public_key", "sort_key",
		"keyId", "tokenized_card", "tokenization_method", "total_tokens", "max_tokens",
		"authorization_code", "authCode", "auth_code", "X-Auth-Email", "author", "possession",
		"secretary", "amount", "status", "",
		// Close to the card and sign-in words, yet no secret.
		"pinned", "shipping", "spinner", "opinion", "pin_status", "pinLength", "cvc_check",
		"cvv_result", "otp_enabled", "otpSentAt", "transaction_id", "transactionId",
		"application_id", "functions", "code", "status_code", "authentication_flow",
		"three_d_secure", "passenger", "option", "topic",
	}
	for _, name := range credential {
		assert.True(t, IsCredential(name), "IsCredential(%q)", name)
		assert.True(t, mayNameCredential([]byte(name)), "RedactFields' prefilter skips %q", name)
	}
	for _, name := range plain {
		assert.False(t, IsCredential(name), "IsCredential(%q)", name)
	}
}

// TestMayNameCredentialScan: the prefilter, which compares stems only
// where a stem's first letter stands, answers as a comparison of every
// stem at every position does, for names with stems at the start, the
// end, cut short, in any case and among bytes that fold onto letters.
func TestMayNameCredentialScan(t *testing.T) {
	every := func(name []byte) bool {
		for _, st := range stems {
			for i := 0; i+len(st) <= len(name); i++ {
				j := 0
				for j < len(st) && name[i+j]|0x20 == st[j] {
					j++
				}
				if j == len(st) {
					return true
				}
			}
		}
		return false
	}
	names := []string{"", "t", "to", "tok", "toke", "token", "xTOKEN", "Pwd", "pw", "sEsS", "ses", "cvc", "cv", "otp", "ot",
		"amount", "status", "currency", "id", "\x54oken", "TOKEn_", "co", "cod", "code", "kEy", "ke", "a", "au", "aut", "auth",
		"P@SS", "pass", "pas", "Cookie", "credentia", "credential", "secre", "secret", "pin", "pi", "\u0074oken"}
	for _, st := range stems {
		names = append(names, st, st[:len(st)-1], "x"+st, st+"x", string(bytes.ToUpper([]byte(st))))
	}
	for _, name := range names {
		assert.Equal(t, every([]byte(name)), mayNameCredential([]byte(name)), "%q", name)
	}
}

func TestFields(t *testing.T) {
	tests := []struct {
		name, in, want string
		changed        bool
	}{
		{"none", `{"id":"ch_1","amount":42}`, `{"id":"ch_1","amount":42}`, false},
		{"camelCase and prefixed", `{"accessToken":"at_1","data":{"clientSecret":"cs_1","secret_key":"sk_1"},"n":1}`,
			`{"accessToken":"[R]","data":{"clientSecret":"[R]","secret_key":"[R]"},"n":1}`, true},
		{"strings and numbers, spacing kept", `{ "apiKey" : "k" , "idToken":12345 , "pin":-1.5e3,"x":true}`,
			`{ "apiKey" : "[R]" , "idToken":"[R]" , "pin":"[R]","x":true}`, true},
		{"null and booleans hold no secret", `{"token":null,"password":false,"otp":true}`,
			`{"token":null,"password":false,"otp":true}`, false},
		{"an object is walked into by its members' names", `{"network_token":{"used":false},"incremental_authorization":{"status":"unavailable"},"apiKey":{"a":[1,"}"]}}`,
			`{"network_token":{"used":false},"incremental_authorization":{"status":"unavailable"},"apiKey":{"a":[1,"}"]}}`, false},
		{"a member of such an object named like one", `{"credentials":{"user":"u","password":"p","n":{"id":7}}}`,
			`{"credentials":{"user":"u","password":"[R]","n":{"id":7}}}`, true},
		{"an array's values under a credential name", `{"api_keys":["k1",2,null,true,["k3"],{"id":"i","secret":"s"}],"ids":["a"]}`,
			`{"api_keys":["[R]","[R]",null,true,["[R]"],{"id":"i","secret":"[R]"}],"ids":["a"]}`, true},
		{"inside arrays", `[{"private_key":"pk"},{"password":"p\"w"}]`, `[{"private_key":"[R]"},{"password":"[R]"}]`, true},
		{"a name written with escapes", `{"\u0074oken":"t1"}`, `{"\u0074oken":"[R]"}`, true},
		{"a value named like one is kept", `{"note":"token","k":["secret"]}`, `{"note":"token","k":["secret"]}`, false},
		{"business fields kept", `{"idempotency_key":"k1","tokenized_card":"4242","authorization_code":"123456"}`,
			`{"idempotency_key":"k1","tokenized_card":"4242","authorization_code":"123456"}`, false},
		{"duplicate names", `{"token":"a","token":"b"}`, `{"token":"[R]","token":"[R]"}`, true},
		{"a credential name as a value after one", `{"token":"token","a":{"secret":["secret"]}}`, `{"token":"[R]","a":{"secret":["[R]"]}}`, true},
		{"not JSON", `{"token":"a"`, `{"token":"a"`, false},
		{"a scalar", `"token"`, `"token"`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := Fields([]byte(tt.in), "[R]")
			assert.Equal(t, tt.want, string(got))
			assert.Equal(t, tt.changed, changed)
			if json.Valid([]byte(tt.in)) {
				assert.True(t, json.Valid(got), "still JSON: %s", got)
			}
		})
	}
}

// TestRedactFieldsKeepsStripeObjects (seam review of issue 30, item 3): a
// Stripe PaymentIntent with its latest Charge keeps every byte but its
// client_secret: the card's extended_authorization,
// incremental_authorization and network_token are objects, walked into
// rather than replaced, so the answer still decodes into stripe-go's types
// (mirrored below: a bool, an int64, a struct where a string would fail).
func TestFieldsKeepStripeObjects(t *testing.T) {
	doc, err := os.ReadFile("testdata/stripe_payment_intent.json")
	require.NoError(t, err)
	const secret = `"pi_3QxYzAB2eZvKYlo21a2b3c4d_secret_F4kE5eCrEtV4lu3x9"`
	require.Equal(t, 1, bytes.Count(doc, []byte(secret)))
	got, changed := Fields(doc, "[R]")
	assert.True(t, changed)
	assert.Equal(t, string(bytes.Replace(doc, []byte(secret), []byte(`"[R]"`), 1)), string(got))
	var pi struct {
		ClientSecret string `json:"client_secret"`
		LatestCharge struct {
			PaymentMethodDetails struct {
				Card struct {
					AuthorizationCode        string                  `json:"authorization_code"`
					Checks                   map[string]any          `json:"checks"`
					ExtendedAuthorization    struct{ Status string } `json:"extended_authorization"`
					IncrementalAuthorization struct{ Status string } `json:"incremental_authorization"`
					Multicapture             struct{ Status string } `json:"multicapture"`
					NetworkToken             struct{ Used bool }     `json:"network_token"`
					Overcapture              struct {
						MaximumAmountCapturable int64  `json:"maximum_amount_capturable"`
						Status                  string `json:"status"`
					} `json:"overcapture"`
				} `json:"card"`
			} `json:"payment_method_details"`
		} `json:"latest_charge"`
	}
	require.NoError(t, json.Unmarshal(got, &pi), "decodes as stripe-go's Charge would")
	card := pi.LatestCharge.PaymentMethodDetails.Card
	assert.Equal(t, "[R]", pi.ClientSecret)
	assert.Equal(t, "disabled", card.ExtendedAuthorization.Status)
	assert.Equal(t, "unavailable", card.IncrementalAuthorization.Status)
	assert.Equal(t, int64(2000), card.Overcapture.MaximumAmountCapturable)
	assert.Equal(t, "123456", card.AuthorizationCode)
	assert.Equal(t, "pass", card.Checks["cvc_check"])
}

// FuzzRedactFields: the result of valid JSON is valid JSON in which every
// string or number that is the value of a member named like a credential,
// or inside an array that is, holds the replacement, and nothing else
// changed (objects are walked into; null and booleans are kept).
func FuzzRedactFields(f *testing.F) {
	for _, s := range []string{`{"accessToken":"a","b":[{"apiKey":1}]}`, `{"\u0074oken":{"x":"}"}}`, `[1,"token",{"k":{"secret":null}}]`, `{"a" : "b" , "password" : [ ] }`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, changed := Fields(doc, "[R]")
		if !json.Valid(doc) {
			if changed || string(got) != string(doc) {
				t.Fatalf("not JSON, yet changed: %q", got)
			}
			return
		}
		decode := func(b []byte) (any, error) {
			d := json.NewDecoder(bytes.NewReader(b))
			d.UseNumber() // 1E700 is JSON, yet no float64
			var v any
			return v, d.Decode(&v)
		}
		out, err := decode(got)
		if err != nil {
			t.Fatalf("result is not JSON: %v: %q", err, got)
		}
		in, _ := decode(doc)
		var walk func(a, b any, named bool)
		walk = func(a, b any, named bool) {
			switch x := a.(type) {
			case map[string]any:
				y, ok := b.(map[string]any)
				if !ok || len(x) != len(y) {
					t.Fatalf("object changed: %q -> %q", doc, got)
				}
				for k, v := range x {
					walk(v, y[k], IsCredential(k))
				}
			case []any:
				y, ok := b.([]any)
				if !ok || len(x) != len(y) {
					t.Fatalf("array changed: %q -> %q", doc, got)
				}
				for i := range x {
					walk(x[i], y[i], named)
				}
			case string, json.Number:
				if named && b != "[R]" {
					t.Fatalf("a credential-named value %v was kept: %q", a, got)
				}
				if !named && a != b {
					t.Fatalf("value %v became %v: %q", a, b, got)
				}
			default:
				if a != b {
					t.Fatalf("value %v became %v: %q", a, b, got)
				}
			}
		}
		walk(in, out, false)
	})
}

// TestRedactURL (hardening issue, class 3): user info, query values and
// fragments of a URL a server sends are never kept.
func TestURL(t *testing.T) {
	tests := []struct {
		in, want string
		secrets  []string
	}{
		{"https://deploy:hunter2hunter2@files.example.net/obj?X-Amz-Signature=fe5f80f77d5fa3be&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE",
			"https://files.example.net/obj?X-Amz-Signature=REDACTED&X-Amz-Credential=REDACTED", []string{"hunter2", "deploy", "fe5f80f77d5fa3be", "AKIAIOSFODNN7EXAMPLE"}},
		{"/receipts/9?access_token=ya29.a0AfH6&access_token=second", "/receipts/9?access_token=REDACTED&access_token=REDACTED", []string{"ya29", "second"}},
		{"https://user@h.example/p", "https://h.example/p", []string{"user@"}},
		{"https://h.example/p#token=abc123abc", "https://h.example/p", []string{"abc123abc"}},
		{"https://h.example/p?sig=a%2Fb%3Dc", "https://h.example/p?sig=REDACTED", []string{"a%2Fb", "a/b"}},
		{"https://h.example/plain/path", "https://h.example/plain/path", nil},
		{"http://[::1", "[unparsable URL]", nil},
		{"https://u:p%zz@h/", "[unparsable URL]", []string{"p%zz"}},
	}
	for _, tt := range tests {
		got := URL(tt.in)
		if got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		for _, s := range tt.secrets {
			if strings.Contains(got, s) {
				t.Errorf("RedactURL(%q) = %q keeps %q", tt.in, got, s)
			}
		}
	}
}

func TestErr(t *testing.T) {
	err := &url.Error{Op: "Post", URL: "https://u:hunter2hunter2@h.example/p?token=s3cr3t-s3cr3t", Err: errors.New("connection refused")}
	got := Err(err)
	if strings.Contains(got, "hunter2") || strings.Contains(got, "s3cr3t") {
		t.Errorf("RedactErr = %q keeps a secret", got)
	}
	if !strings.Contains(got, "h.example/p?token=REDACTED") || !strings.Contains(got, "connection refused") {
		t.Errorf("RedactErr = %q: want the redacted URL and the cause", got)
	}
	if got := Err(errors.New("plain")); got != "plain" {
		t.Errorf("RedactErr(plain) = %q", got)
	}
}

// TestRedactQueriesInQuotedText: a query inside a quoted string of an
// error (a server's header line or URL that Go quotes with %q) is cut up
// to the closing quote, spaces and escapes included: a malformed line may
// hold a space before the value. Found by FuzzPoll
// (activities/testdata/fuzz/FuzzPoll/77b54f7ae28168eb).
func TestQueriesInQuotedText(t *testing.T) {
	const secret = "qsv_3c4d5e6f7a8b9c0d"
	tests := []struct{ in, want string }{
		{`net/http: HTTP/1.x transport connection broken: malformed MIME header line: "Location: sigesults/1? /\x01=` + secret + `"`,
			`net/http: HTTP/1.x transport connection broken: malformed MIME header line: "Location: sigesults/1?REDACTED"`},
		{`parse "http://h/p?a=1 b=` + secret + `": invalid character " " in URL`,
			`parse "http://h/p?REDACTED": invalid character " " in URL`},
		{`bad line "x?a=\"` + secret + `\" y" then ?tail=` + secret + ` end`,
			`bad line "x?REDACTED" then ?REDACTED end`},
		{`unclosed "Location: /x? ` + secret, `unclosed "Location: /x?REDACTED`},
		{`outside quotes: /x?a=1 b=2`, `outside quotes: /x?REDACTED b=2`},
		{`a "quoted" word and /p?q=1`, `a "quoted" word and /p?REDACTED`},
		{`empty query "?" here`, `empty query "?" here`},
	}
	for _, tt := range tests {
		got := Err(errors.New(tt.in))
		if got != tt.want {
			t.Errorf("RedactErr(%q)\n = %q\nwant %q", tt.in, got, tt.want)
		}
		if strings.Contains(got, "3c4d5e6f") {
			t.Errorf("RedactErr(%q) = %q keeps the secret", tt.in, got)
		}
	}
}

func TestURLQueryWithoutValues(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://h/p?tok_live_abcdef123456", "https://h/p?REDACTED=REDACTED"},
		{"https://h/p?a=1&tok_live_abcdef123456&X-Amz-Signature=abc", "https://h/p?a=REDACTED&REDACTED=REDACTED&X-Amz-Signature=REDACTED"},
		{"https://u:p@h/p#frag", "https://h/p"},
	}
	for _, tt := range tests {
		if got := URL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestRedactURLNotClean (issue 30, item 14): a URL holding a byte no URL
// holds (raw, or percent-escaped where it makes no valid UTF-8 or a
// control character; an escaped "?" hiding a query in the path) is shown
// only up to that byte: what cannot be read as a URL is never shown whole.
func TestURLNotClean(t *testing.T) {
	const qv = "qsv_3c4d5e6f7a8b9c0d"
	tests := []struct{ in, want string }{
		{"/results/1\xff\xffig=" + qv, "/results/1" + CutURL},
		{"http://127.0.0.1:39825/results/1%FF%FFig=" + qv, "http://127.0.0.1:39825/results/1" + CutURL},
		{"https://h.example/a b?sig=" + qv, "https://h.example/a" + CutURL},
		{"https://h.example/a\x00b=" + qv, "https://h.example/a" + CutURL},
		{"https://h.example/a%00b=" + qv, "https://h.example/a" + CutURL},
		{"https://h.example/a%3Fsig=" + qv, "https://h.example/a" + CutURL},
		{"https://h.example/a\"sig=" + qv, "https://h.example/a" + CutURL},
		{"https://u:p@h.example/r/\xc3?sig=" + qv, "https://h.example/r/" + CutURL},
		{"https://h\xff.example/" + qv, "https://" + CutURL},
		{"https://u:1234\xff5678@h.example/", "https://" + CutURL}, // a password's digits, not a port
		{"HTTPS://u:1234%005678@h.example/", "https://" + CutURL},
		{"/x//y\xff" + qv, CutURL},
		{"\xff" + qv, CutURL},
		// Clean URLs as before: escaped UTF-8 and escapes that make ASCII.
		{"https://h.example/caf%C3%A9/%2F?sig=" + qv, "https://h.example/caf%C3%A9/%2F?sig=REDACTED"},
		{"https://h.example/caf\xc3\xa9", "https://h.example/caf%C3%A9"},
	}
	for _, tt := range tests {
		got := URL(tt.in)
		if got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if strings.Contains(got, qv[:8]) {
			t.Errorf("RedactURL(%q) = %q shows the value", tt.in, got)
		}
	}
}
