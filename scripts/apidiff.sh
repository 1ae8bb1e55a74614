#!/usr/bin/env bash
# The compatibility check (make apidiff): the public packages' API against
# the baseline named in api/BASELINE, by golang.org/x/exp/cmd/apidiff (the
# Go team's checker, pinned in tools/apidiff/go.mod and built into
# bin/apidiff). api/v1.txt lists what the API is; this says whether a
# change breaks code written against the baseline.
#
# Every incompatible change apidiff reports must be listed, word for word,
# in api/incompatible.txt: a deliberate break, said in CHANGELOG.md. An
# unlisted one fails the check, and so does a listed one that apidiff no
# longer reports (the list stays exact). When a release is tagged,
# api/BASELINE names its tag and api/incompatible.txt is emptied.
#
# The public packages are those api/v1.txt lists, at the baseline and now
# (a package of the baseline that is gone is an incompatible change). The
# baseline's tree comes from git (git archive): the clone must hold that
# commit. Its dependencies come from the module cache or the Go module
# proxy, as the build's do.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export GOWORK=off GOFLAGS=-buildvcs=false

mod=$(go list -m)
base=$(awk '!/^#/ && NF {print $1; exit}' api/BASELINE)
allow=api/incompatible.txt
apidiff=${APIDIFF:-$root/bin/apidiff}
if [ ! -x "$apidiff" ]; then
	go build -C tools/apidiff -o "$apidiff" golang.org/x/exp/cmd/apidiff
fi
if ! git cat-file -e "$base^{commit}" 2>/dev/null; then
	echo "apidiff: the baseline $base (api/BASELINE) is not in this clone; fetch it (git fetch --unshallow)" >&2
	exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/old"
git archive "$base" | tar -x -C "$tmp/old"

# packages FILE: the package names a listing holds ("activities", or the
# module path for the root package), one a line.
packages() { sed -n 's/^pkg \([^,]*\),.*/\1/p' "$1" | sort -u; }
packages api/v1.txt >"$tmp/new.pkgs"
if [ -f "$tmp/old/api/v1.txt" ]; then
	packages "$tmp/old/api/v1.txt" >"$tmp/old.pkgs"
else
	cp "$tmp/new.pkgs" "$tmp/old.pkgs"
fi

: >"$tmp/report"
while read -r p; do
	path=$mod/$p
	[ "$p" = "$mod" ] && path=$mod
	if ! grep -qxF "$p" "$tmp/new.pkgs"; then
		echo "$p: package removed" >>"$tmp/report"
		continue
	fi
	x=${p//\//_}
	(cd "$tmp/old" && "$apidiff" -w "$tmp/$x.old" "$path")
	"$apidiff" -w "$tmp/$x.new" "$path"
	"$apidiff" -incompatible "$tmp/$x.old" "$tmp/$x.new" | sed -n "s|^- |$p: |p" >>"$tmp/report"
done <"$tmp/old.pkgs"

sort -u "$tmp/report" -o "$tmp/report"
{ grep -v '^#' "$allow" || true; } | sed '/^[[:space:]]*$/d' | sort -u >"$tmp/allowed"
unlisted=$(comm -23 "$tmp/report" "$tmp/allowed")
stale=$(comm -13 "$tmp/report" "$tmp/allowed")
n=$(wc -l <"$tmp/report")
if [ -n "$unlisted" ]; then
	echo "apidiff: incompatible with the baseline $base (api/BASELINE) and not listed in $allow:"
	echo "$unlisted" | sed 's/^/  /'
	echo "Keep the API compatible, or, if the break is deliberate, add these lines to $allow and say the change in CHANGELOG.md."
fi
if [ -n "$stale" ]; then
	echo "apidiff: listed in $allow but no longer reported: remove these lines:"
	echo "$stale" | sed 's/^/  /'
fi
if [ -n "$unlisted$stale" ]; then
	exit 1
fi
echo "apidiff: compatible with the baseline $base but for the $n deliberate changes of $allow"
