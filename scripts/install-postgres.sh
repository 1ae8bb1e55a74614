#!/usr/bin/env bash
# install-postgres.sh makes sure PostgreSQL server binaries (initdb, postgres,
# pg_isready) are present under /usr/lib/postgresql/*/bin, installing Debian's
# "postgresql" package when they are not. It is idempotent: when the binaries
# are already there it changes nothing and exits 0.
#
# The cluster tests (harness/cluster, integration/cluster) run their own
# throw-away PostgreSQL instance in a temporary directory on a loopback port;
# they never use the system cluster. So the package is installed without
# creating (or starting) Debian's default "main" cluster.
#
# Needs root (CI runs as root on Debian 12). Usage: scripts/install-postgres.sh
set -euo pipefail

have_postgres() {
	local d
	for d in /usr/lib/postgresql/*/bin; do
		if [[ -x "$d/initdb" && -x "$d/postgres" && -x "$d/pg_isready" ]]; then
			echo "install-postgres: found PostgreSQL binaries in $d"
			return 0
		fi
	done
	return 1
}

if have_postgres; then
	exit 0
fi

if [[ "$(id -u)" != 0 ]]; then
	echo "install-postgres: PostgreSQL server binaries are missing under /usr/lib/postgresql/*/bin" >&2
	echo "install-postgres: run this script as root, or: sudo apt-get install -y postgresql" >&2
	exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-postgres: apt-get not found; install the PostgreSQL server (initdb, postgres) by hand" >&2
	exit 1
fi

# Keep postgresql-common from creating (and starting) the system "main"
# cluster: the tests start their own instance. Debian's createcluster.conf
# includes this directory.
mkdir -p /etc/postgresql-common/createcluster.d
cat >/etc/postgresql-common/createcluster.d/90-no-main-cluster.conf <<'CONF'
# Written by scripts/install-postgres.sh: tests run their own instance.
create_main_cluster = false
CONF

export DEBIAN_FRONTEND=noninteractive
echo "install-postgres: installing Debian package postgresql"
apt-get update
apt-get install -y --no-install-recommends postgresql

if ! have_postgres; then
	echo "install-postgres: apt-get install postgresql finished but no initdb/postgres under /usr/lib/postgresql/*/bin" >&2
	exit 1
fi
