#!/usr/bin/env bash
# install-promtool.sh makes sure promtool (Prometheus' rule checker) is on
# PATH, installing Debian's "prometheus" package when it is not; make
# rules-test checks and unit-tests monitoring/alerts.yml with it. It is
# idempotent, and it leaves no Prometheus server running (the package's
# service is not started where systemd does not run, as in CI; where it
# does, it is stopped and disabled: nothing here needs it).
#
# Needs root (CI runs as root on Debian 12). Usage: scripts/install-promtool.sh
set -euo pipefail

if command -v promtool >/dev/null 2>&1; then
	exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
	echo "install-promtool: promtool is missing; run this script as root, or: sudo apt-get install -y prometheus" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-promtool: apt-get not found; install promtool (Prometheus 2.x) by hand" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
echo "install-promtool: installing Debian package prometheus (for promtool)"
apt-get update
apt-get install -y --no-install-recommends prometheus
if command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
	systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
command -v promtool >/dev/null
