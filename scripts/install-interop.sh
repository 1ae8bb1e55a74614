#!/usr/bin/env bash
# install-interop.sh installs the interop suite's third-party idempotency
# servers: the npm packages pinned by interop/node/package-lock.json, with
# `npm ci`, into interop/node/node_modules. It is idempotent and quick when
# they are already installed from the same lock file (a stamp records its
# hash). When node or npm is missing it installs Debian's nodejs and npm
# packages (as root; otherwise it says what to run).
#
# The interop tests run it themselves when node_modules is missing, so
# `make test` works on a fresh clone. Usage: scripts/install-interop.sh
set -euo pipefail
cd "$(dirname "$0")/../interop/node"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
		echo "install-interop: node and npm are needed: sudo apt-get install -y nodejs npm" >&2
		exit 1
	fi
	echo "install-interop: installing Debian's nodejs and npm packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

stamp=node_modules/.idemhttp-install-stamp
want="$(sha256sum package-lock.json | cut -d' ' -f1) node $(node --version)"

install() {
	if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
		echo "install-interop: interop/node/node_modules is up to date"
		return 0
	fi
	echo "install-interop: npm ci in interop/node ($(node --version), npm $(npm --version))"
	npm ci --no-audit --no-fund --loglevel=error
	echo "$want" >"$stamp"
}

# Test binaries of several packages may call this at once: take turns.
if command -v flock >/dev/null 2>&1; then
	exec 9>.install.lock
	flock 9
fi
install
