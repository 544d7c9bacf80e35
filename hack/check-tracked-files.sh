#!/usr/bin/env bash
# Fails when git tracks a file that looks built rather than written: an
# executable (by mode, or by ELF, Mach-O or PE magic) or a file over 1 MB,
# unless it is listed in hack/tracked-files-allowlist.txt. Checks the index,
# so a staged binary fails too. Run by make test.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
allowlist=hack/tracked-files-allowlist.txt
max_bytes=$((1024 * 1024))

declare -A allowed
while read -r path _; do
	[[ -z "$path" || "$path" == \#* ]] && continue
	allowed[$path]=1
done <"$allowlist"

fail=0
complain() {
	echo "$1: $2; build outputs go to _output/ (ignored). Remove it with git rm --cached, or, for a fixture or script that must be tracked, list it in $allowlist with a reason." >&2
	fail=1
}

# git ls-files -s: MODE OBJECT STAGE<TAB>PATH
while IFS=$'\t' read -r meta path; do
	[[ -n "${allowed[$path]:-}" ]] && continue
	mode=${meta%% *}
	case "$mode" in
	100755) complain "$path" "tracked with executable mode" ;;
	120000 | 160000) continue ;; # symlink, submodule
	esac
	[[ -f "$path" ]] || continue # deleted in the work tree, staged in the index
	size=$(stat -c %s -- "$path")
	if ((size > max_bytes)); then
		complain "$path" "tracked, $((size / 1024)) KiB (over 1 MB)"
	fi
	magic=$(head -c 4 -- "$path" | od -An -tx1 | tr -d ' \n')
	case "$magic" in
	7f454c46) complain "$path" "an ELF binary is tracked" ;;
	feedface | feedfacf | cefaedfe | cffaedfe | cafebabe) complain "$path" "a Mach-O binary is tracked" ;;
	4d5a*) complain "$path" "a PE (Windows) binary is tracked" ;;
	esac
done < <(git ls-files -s)

if ((fail)); then
	exit 1
fi
echo "tracked files: ok (no executables or files over 1 MB outside $allowlist)"
