package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
)

// PostgresUser and PostgresPassword are the superuser that the throw-away
// PostgreSQL instance is initialised with, and that Temporal connects as.
// The instance only listens on 127.0.0.1 and lives as long as the test.
const (
	PostgresUser     = "temporal"
	PostgresPassword = "temporal"
)

// postgresGlob is where Debian's packages put each major version's binaries.
const postgresGlob = "/usr/lib/postgresql/*/bin"

// FindPostgres returns the bin directory of the newest PostgreSQL server
// installed from Debian's packages (one with initdb, postgres and pg_isready).
func FindPostgres() (string, error) {
	dirs, _ := filepath.Glob(postgresGlob)
	type cand struct {
		dir string
		ver int
	}
	var cands []cand
	for _, d := range dirs {
		ok := true
		for _, b := range []string{"initdb", "postgres", "pg_isready"} {
			if fi, err := os.Stat(filepath.Join(d, b)); err != nil || fi.Mode()&0o111 == 0 {
				ok = false
			}
		}
		if !ok {
			continue
		}
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		cands = append(cands, cand{d, v})
	}
	if len(cands) == 0 {
		return "", fmt.Errorf("cluster: no PostgreSQL server binaries (initdb, postgres, pg_isready) under %s", postgresGlob)
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].ver > cands[j].ver })
	return cands[0].dir, nil
}

// EnsurePostgres returns [FindPostgres]'s directory, running
// scripts/install-postgres.sh first when no server is installed. The script
// installs Debian's postgresql package and needs root; as another user, or
// without apt-get, EnsurePostgres fails and says what to install.
func EnsurePostgres(ctx context.Context, logf func(string, ...any)) (string, error) {
	if dir, err := FindPostgres(); err == nil {
		return dir, nil
	}
	root, err := itest.RepoRoot()
	if err != nil {
		return "", err
	}
	script := filepath.Join(root, "scripts", "install-postgres.sh")
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("cluster: PostgreSQL server binaries are missing under %s and this is not root, so they cannot be installed here: run `sudo %s` (Debian: apt-get install postgresql)", postgresGlob, script)
	}
	if logf != nil {
		logf("cluster: PostgreSQL missing; running %s", script)
	}
	cmd := exec.CommandContext(ctx, "bash", script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("cluster: %s failed: %w\n%s", script, err, out)
	}
	dir, err := FindPostgres()
	if err != nil {
		return "", fmt.Errorf("%w (after running %s:\n%s)", err, script, out)
	}
	return dir, nil
}

// Postgres is a running throw-away PostgreSQL instance: its own data
// directory in a temporary directory, listening on 127.0.0.1 only.
type Postgres struct {
	// Port is the TCP port on 127.0.0.1.
	Port int
	// Dir is the temporary directory holding the data directory, the
	// socket directory and the log; Stop removes it.
	Dir string

	binDir string
	proc   *itest.Process
}

// HostPort returns 127.0.0.1:Port.
func (p *Postgres) HostPort() string { return itest.HostPort(p.Port) }

// LogPath returns the server's log file.
func (p *Postgres) LogPath() string { return filepath.Join(p.Dir, "postgres.log") }

// postgresCredential returns the credential to run initdb and postgres
// with: the postgres user (created by Debian's package) when running as
// root, which PostgreSQL refuses to run as; nil (this user) otherwise.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("cluster: PostgreSQL does not run as root and there is no postgres user to run it as (Debian's postgresql package creates it: scripts/install-postgres.sh): %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("cluster: postgres user: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// StartPostgres initialises a new data directory with initdb (superuser
// [PostgresUser], password authentication) and starts postgres on
// 127.0.0.1:port, returning once it accepts connections. binDir is
// [FindPostgres]'s directory.
func StartPostgres(ctx context.Context, binDir string, port int, logf func(string, ...any)) (_ *Postgres, err error) {
	cred, err := postgresCredential()
	if err != nil {
		return nil, err
	}
	sweepStalePostgresDirs()
	// A directory of its own under the system temp dir: the postgres user
	// must be able to reach it, which it cannot inside a test's 0700 dirs.
	dir, err := os.MkdirTemp("", "idemhttp-pg-")
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	pg := &Postgres{Port: port, Dir: dir, binDir: binDir}
	defer func() {
		if err != nil {
			_ = pg.Stop()
		}
	}()
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(PostgresPassword+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if cred != nil {
		for _, p := range []string{dir, pwfile} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("cluster: chown %s to postgres: %w", p, err)
			}
		}
	}
	env := []string{"PATH=" + binDir + ":/usr/bin:/bin", "HOME=" + dir, "LC_ALL=C", "LANG=C"}
	dataDir := filepath.Join(dir, "data")
	sockDir := dataDir // the socket lives in the data directory: nothing else needed
	start := time.Now()
	err = runLogged(itest.Spec{
		Name: "initdb", Path: filepath.Join(binDir, "initdb"), Dir: dir, Env: env, ReplaceEnv: true,
		Args: []string{
			"-D", dataDir, "-U", PostgresUser, "--pwfile=" + pwfile,
			"--auth=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-sync",
		},
		LogPath: filepath.Join(dir, "initdb.log"), Credential: cred,
	}, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	pg.proc, err = itest.Start(itest.Spec{
		Name: "postgres", Path: filepath.Join(binDir, "postgres"), Dir: dir, Env: env, ReplaceEnv: true,
		Args: []string{
			"-D", dataDir,
			"-p", strconv.Itoa(port),
			"-c", "listen_addresses=127.0.0.1",
			"-c", "unix_socket_directories=" + sockDir,
			"-c", "max_connections=200",
			// A test database: durability buys nothing and costs time.
			"-c", "fsync=off",
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off",
		},
		LogPath: pg.LogPath(), Credential: cred,
		StopSignal: syscall.SIGINT, // fast shutdown
	})
	if err != nil {
		return nil, err
	}
	for {
		if pg.proc.Exited() {
			return nil, fmt.Errorf("cluster: postgres exited during startup (%v); log %s:\n%s", pg.proc.Err(), pg.LogPath(), itest.FileTail(pg.LogPath(), 4096))
		}
		check := exec.CommandContext(ctx, filepath.Join(binDir, "pg_isready"),
			"-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", PostgresUser, "-d", "postgres", "-t", "2")
		check.Env = env
		if check.Run() == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cluster: postgres not ready: %w; log %s:\n%s", ctx.Err(), pg.LogPath(), itest.FileTail(pg.LogPath(), 4096))
		case <-time.After(100 * time.Millisecond):
		}
	}
	if logf != nil {
		logf("cluster: postgres %s ready on %s in %s", filepath.Base(filepath.Dir(binDir)), pg.HostPort(), time.Since(start).Round(time.Millisecond))
	}
	return pg, nil
}

// sweepStalePostgresDirs removes the directories of instances whose test
// process died without stopping them (a test binary killed by its timeout,
// say): older than an hour, and no live postmaster. The kernel has already
// killed such a postmaster (parent-death signal); only its files remain.
func sweepStalePostgresDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "idemhttp-pg-*"))
	for _, d := range dirs {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() || time.Since(fi.ModTime()) < time.Hour {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(d, "data", "postmaster.pid")); err == nil {
			first, _, _ := strings.Cut(string(b), "\n")
			if pid, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && syscall.Kill(pid, 0) == nil {
				continue // still running
			}
		}
		_ = os.RemoveAll(d)
	}
}

// Stop shuts the server down (fast shutdown, then SIGKILL) and removes its
// directory.
func (p *Postgres) Stop() error {
	var errs []error
	if p.proc != nil {
		errs = append(errs, p.proc.Stop(20*time.Second))
	}
	if p.Dir != "" && strings.Contains(filepath.Base(p.Dir), "idemhttp-pg-") {
		errs = append(errs, os.RemoveAll(p.Dir))
	}
	return errors.Join(errs...)
}
