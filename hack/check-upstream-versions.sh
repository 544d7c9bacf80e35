#!/usr/bin/env bash
# Checks hack/upstream-versions.txt, the list of files that port Kubernetes
# code, against the modules the repository builds with:
#   - each listed module's version in go.mod equals the recorded version
#     (otherwise the dependency moved without the ports being reviewed);
#   - each listed file exists and its header keeps the Kubernetes Authors'
#     copyright and names the upstream module, path and version;
#   - each Go file with that copyright is listed.
# Run by make test.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
list=hack/upstream-versions.txt

# Where each upstream module's version is read: the go.mod of the module
# the ported file belongs to if it requires it (components/ builds with
# k8s.io/kubernetes itself), else the first of these go.mod files that
# requires it.
gomods=(go.mod tools/apiserver/go.mod)

# own_gomod FILE: the go.mod of the module FILE belongs to.
own_gomod() {
	local dir
	dir=$(dirname "$1")
	while [[ "$dir" != "." && ! -f "$dir/go.mod" ]]; do
		dir=$(dirname "$dir")
	done
	echo "$dir/go.mod"
}

# version_in MODULE FILE: "VERSION GOMOD" of the first go.mod requiring
# MODULE, FILE's own first.
version_in() {
	local gomod v
	for gomod in "$(own_gomod "$2")" "${gomods[@]}"; do
		v=$(awk -v m="$1" '
			$1 == "require" && $2 == m { print $3; exit }
			$1 == m && $2 != "=>" { print $2; exit }' "$gomod")
		if [[ -n "$v" ]]; then
			echo "$v $gomod"
			return
		fi
	done
}

fail=0
declare -A listed
while read -r file module path version; do
	[[ -z "$file" || "$file" == \#* ]] && continue
	listed[$file]=1
	read -r have gomod < <(version_in "$module" "$file") || true
	if [[ -z "${have:-}" ]]; then
		echo "$list: $file follows $module $version, but no go.mod (${gomods[*]}) requires $module." >&2
		fail=1
	elif [[ "$have" != "$version" ]]; then
		echo "$list: $file follows $module $version ($path), but $gomod now requires $module $have." >&2
		echo "  Review $path between $version and $have, carry the changes into $file," >&2
		echo "  then record $have in $list and in the file's header." >&2
		fail=1
	fi
	if [[ ! -f "$file" ]]; then
		echo "$list: $file does not exist; remove or fix its line." >&2
		fail=1
		continue
	fi
	header=$(sed -n '1,/^package /p' "$file")
	for want in "Copyright The Kubernetes Authors" "$module $version" "$path"; do
		if ! grep -qF -- "$want" <<<"$header"; then
			echo "$file: its header (before the package clause) must contain \"$want\" (see $list)." >&2
			fail=1
		fi
	done
done <"$list"

while read -r file; do
	if [[ -z "${listed[$file]:-}" ]]; then
		echo "$file: carries the Kubernetes Authors' copyright but is not listed in $list; add its upstream file and version." >&2
		fail=1
	fi
done < <(git grep -l "Copyright The Kubernetes Authors" -- '*.go')

if ((fail)); then
	exit 1
fi
echo "upstream versions: ok ($(grep -cv '^\s*\(#\|$\)' "$list") ported file entries)"
