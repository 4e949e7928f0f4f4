#!/usr/bin/env bash
# Fails when git tracks a file over 1 MiB or an executable binary (ELF,
# Mach-O, PE): build output belongs in bin/ (ignored), never in git.
# Exceptions, by path, one a line in ALLOWED with the reason beside it.
set -euo pipefail
cd "$(dirname "$0")/.."

limit=$((1024 * 1024))
ALLOWED=(
	# none yet
)

status=0
while IFS= read -r -d '' f; do
	[[ -f $f ]] || continue # deleted in the work tree, not yet committed
	for a in "${ALLOWED[@]}"; do [[ $f == "$a" ]] && continue 2; done
	size=$(stat -c %s "$f")
	if ((size > limit)); then
		echo "check-size: $f is $size bytes, over the 1 MiB limit: remove it from git (git rm --cached) or, if it must be there, list it in ALLOWED in hack/check-size.sh with the reason" >&2
		status=1
	fi
	magic=$(head -c 4 "$f" | od -An -tx1 | tr -d ' \n')
	case $magic in
	7f454c46 | cffaedfe | cefaedfe | feedface | feedfacf | 4d5a*)
		echo "check-size: $f is an executable binary: build output goes in bin/ (git rm --cached $f)" >&2
		status=1
		;;
	esac
done < <(git ls-files -z)
exit $status
