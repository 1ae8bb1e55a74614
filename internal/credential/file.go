package credential

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/httpheader"
)

// checkEvery is how often, at most, a header file is looked at (stat) for a
// change.
var checkEvery = time.Second

// settle is how old an in-place write of a header file (the same inode)
// must be before the file is read: a writer truncates, then writes, maybe
// in pieces, and half of a 40-byte key is long enough to be sent. A file
// renamed over the old one (a new inode, as Kubernetes and most secret
// managers write) is complete, and read at once.
const settle = time.Second

// headerFiles sends headers whose values are files' contents
// (Credential.HeaderFiles), re-read when a file changes.
type headerFiles struct {
	files []*headerFile
	r     Redactor
	logf  func(msg string, kv ...any)
	now   func() time.Time // time.Now but in tests
}

// headerFile is one header read from one file (or one secret: see
// NewOAuth2With's OAuth2Options.SecretFile).
type headerFile struct {
	name, path string
	// what the file holds, for errors ("the header's value"); setting
	// names the setting that names the file, for logs.
	what, setting string
	cur           atomic.Pointer[fileValue]
	// next is when the file is looked at again (Unix nanoseconds).
	next atomic.Int64
	mu   sync.Mutex
	// failed is the last failure logged (under mu), so that a file that
	// stays broken is logged once, not every second.
	failed string
}

// fileValue is what a file held when it was read, and what identified it
// then (modification time, size, inode).
type fileValue struct {
	value []string
	parts []string
	id    fileID
}

type fileID struct {
	mtime time.Time
	size  int64
	inode uint64
}

// NewHeaderFiles returns the Source that sets each header named in files
// to the whole content of its file (one line; white space around it
// trimmed), and tells r its secrets (SecretParts). A file is looked at (stat) at most
// once a second when requests are sent; when its modification time, size
// or inode changed it is read again and its new value sent from then on,
// the old one staying redacted (RetainFor). A file that cannot be read
// then, or holds a value too short to redact, keeps the last value, and
// logf says why (with the setting, as n names HeaderFiles[name]). At
// NewHeaderFiles either is an error naming it.
func NewHeaderFiles(files map[string]string, r Redactor, logf func(msg string, kv ...any), n Names) (Source, error) {
	s := &headerFiles{r: r, logf: logf, now: time.Now}
	for name, path := range files {
		canon := http.CanonicalHeaderKey(name)
		field := "HeaderFiles[" + name + "]"
		if !httpheader.ValidName(canon) {
			return nil, fmt.Errorf("%s: invalid header name %q", n.head(field), name)
		}
		f := &headerFile{name: canon, path: path, what: "the header's value", setting: n.Of(field)}
		v, err := f.read()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.head(field), err)
		}
		for _, p := range v.parts {
			r.Add(p)
		}
		f.cur.Store(v)
		f.next.Store(time.Now().Add(checkEvery).UnixNano())
		s.files = append(s.files, f)
	}
	return s, nil
}

// read reads the file, with what identifies it.
func (f *headerFile) read() (*fileValue, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, fmt.Errorf("%w; write %s in that file, or fix the path", err, f.what)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	const maxFileBytes = 64 << 10
	b := make([]byte, min(fi.Size(), maxFileBytes)+1)
	n, err := fh.ReadAt(b, 0)
	if err != nil && n == 0 && fi.Size() > 0 {
		return nil, fmt.Errorf("reading %s: %w", f.path, err)
	}
	if n > maxFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes: it must hold only %s", f.path, maxFileBytes, f.what)
	}
	v := strings.TrimSpace(string(b[:n]))
	if strings.ContainsAny(v, "\r\n") {
		return nil, fmt.Errorf("%s holds more than one line: it must hold only %s", f.path, f.what)
	}
	parts, err := SecretParts(f.name, v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.path, err)
	}
	return &fileValue{value: []string{v}, parts: parts, id: idOf(fi)}, nil
}

// Apply sets each header to its file's value, read again first if the
// file changed.
func (s *headerFiles) Apply(_ context.Context, req *http.Request, _ []byte) error {
	for _, f := range s.files {
		v := s.value(f)
		for _, p := range v.parts {
			s.r.Add(p)
		}
		req.Header[f.name] = v.value
	}
	return nil
}

// value is f's value, read again first if the file changed (looked at
// at most once every checkEvery).
func (s *headerFiles) value(f *headerFile) *fileValue {
	now := s.now().UnixNano()
	if next := f.next.Load(); now >= next && f.next.CompareAndSwap(next, now+int64(checkEvery)) {
		s.check(f)
	}
	return f.cur.Load()
}

// check reads f again if it changed since it was read.
func (s *headerFiles) check(f *headerFile) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := f.cur.Load()
	fi, err := os.Stat(f.path)
	if err != nil {
		s.fail(f, "credential file cannot be read: the last value read is sent", err)
		return
	}
	id := idOf(fi)
	if id == cur.id {
		return
	}
	if id.inode == cur.id.inode && s.now().Sub(id.mtime) < settle {
		return // being written in place, maybe: looked at again later
	}
	v, err := f.read()
	if err != nil {
		s.fail(f, "credential file cannot be used: the last value read is sent", err)
		return
	}
	f.failed = ""
	// Known to the redactor before it is sent.
	for _, p := range v.parts {
		s.r.Add(p)
	}
	f.cur.Store(v)
}

// fail logs why f cannot be used, unless that was logged last.
func (s *headerFiles) fail(f *headerFile, msg string, err error) {
	if e := err.Error(); e != f.failed {
		f.failed = e
		key := "header"
		if f.what != "the header's value" {
			key = "secret"
		}
		s.logf(msg, key, f.name, "path", f.path, "setting", f.setting, "error", e)
	}
}
