#!/usr/bin/env bash
# apicheck.sh APIDIFF: fails if the library's exported API (pkg/..., as
# golang.org/x/exp's apidiff sees it) changed incompatibly since BASE: the
# newest release tag v*, or API_BASE (any revision) when set. An
# incompatible change a release means to make is accepted by copying
# apidiff's line for it into hack/apidiff-accepted.txt, with the CHANGELOG
# entry that tells users what to write instead; the file is emptied when
# the release is tagged.
set -euo pipefail
apidiff=$(realpath "$1")
cd "$(dirname "$0")/.."
base=${API_BASE:-$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null || true)}
if [ -z "$base" ]; then
	echo "api-check: no release tag v* yet, so no API to compare with (API_BASE=<revision> compares with any commit)"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/old"
git archive "$base" | tar -x -C "$tmp/old"
(cd "$tmp/old" && GOWORK=off "$apidiff" -m -w "$tmp/old.api" github.com/ctrlkit/ctrlkit 2> >(grep -v "^Ignoring internal package" >&2))
GOWORK=off "$apidiff" -m -w "$tmp/new.api" github.com/ctrlkit/ctrlkit 2> >(grep -v "^Ignoring internal package" >&2)
"$apidiff" -m -incompatible "$tmp/old.api" "$tmp/new.api" 2> >(grep -v "^Ignoring internal package" >&2) >"$tmp/report"
echo >>"$tmp/report" # apidiff ends its last line without a newline
# Each change is a line "- ./pkg/NAME.IDENT: what changed"; it is accepted
# when the line, without its "- ", is in the accepted file.
grep -v '^#' hack/apidiff-accepted.txt | sed '/^$/d' >"$tmp/accepted" || true
sed -n 's/^- //p' "$tmp/report" | grep -vxF -f "$tmp/accepted" >"$tmp/unaccepted" || true
if [ -s "$tmp/unaccepted" ]; then
	echo "api-check: incompatible changes to the exported API since $base:"
	cat "$tmp/unaccepted"
	echo "Keep the old names working or, if the next release means to break them, add these lines to"
	echo "hack/apidiff-accepted.txt and say in CHANGELOG.md what users write instead."
	exit 1
fi
echo "api-check: no unaccepted incompatible change to the exported API since $base"
