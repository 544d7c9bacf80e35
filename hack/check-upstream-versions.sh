#!/usr/bin/env bash
# Checks hack/upstream-versions.txt, the list of files that port Kubernetes
# code or reach into another library's private state, against the modules
# the repository builds with:
#   - each listed module's version in go.mod equals the recorded version
#     (otherwise the dependency moved without the file being reviewed);
#   - every module of ours (each go.mod outside tools/) that requires a
#     listed module requires it at the recorded version: the nested modules
#     build the library, whose files were reviewed against that version;
#   - each listed file exists and its header names the upstream module, path
#     and version: a port's keeps the Kubernetes Authors' copyright and names
#     "<module> <version>" and the path, a reach's says
#     "Reaches into <module> <path> at <version>:";
#   - each Go file with that copyright is listed as a port;
#   - each Go file outside tests and tools/ that imports "unsafe", calls
#     reflect.NewAt or FieldByName, or uses //go:linkname is listed as a
#     reach, unless each such line is marked public (see the list).
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

# required_version MODULE GOMOD: the version GOMOD requires MODULE at, if any.
required_version() {
	awk -v m="$1" '
		$1 == "require" && $2 == m { print $3; exit }
		$1 == m && $2 != "=>" { print $2; exit }' "$2"
}

# version_in MODULE FILE: "VERSION GOMOD" of the first go.mod requiring
# MODULE, FILE's own first.
version_in() {
	local gomod v
	for gomod in "$(own_gomod "$2")" "${gomods[@]}"; do
		v=$(required_version "$1" "$gomod")
		if [[ -n "$v" ]]; then
			echo "$v $gomod"
			return
		fi
	done
}

# ours: the go.mod of every module of ours, as the Makefile's MODULES
# finds them: tracked or new, outside the build-only modules under tools/.
mapfile -t ours < <(git ls-files --cached --others --exclude-standard -- go.mod '*/go.mod' | grep -v '^tools/')

fail=0
declare -A listed reaches checked
while read -r file module path version kind extra; do
	[[ -z "$file" || "$file" == \#* ]] && continue
	kind=${kind:-port}
	if [[ -z "$version" || -n "${extra:-}" || ("$kind" != port && "$kind" != reach) ]]; then
		echo "$list: \"$file $module $path $version $kind ${extra:-}\": want file, module, path, version and an optional kind (port or reach)." >&2
		fail=1
		continue
	fi
	if [[ "$kind" == port ]]; then
		listed[$file]=1
	else
		reaches[$file]=1
	fi
	read -r have gomod < <(version_in "$module" "$file") || true
	if [[ -z "${have:-}" ]]; then
		echo "$list: $file follows $module $version, but no go.mod (${gomods[*]}) requires $module." >&2
		fail=1
	elif [[ "$have" != "$version" ]]; then
		echo "$list: $file follows $module $version ($path), but $gomod now requires $module $have." >&2
		if [[ "$kind" == port ]]; then
			echo "  Review $path between $version and $have, carry the changes into $file," >&2
		else
			echo "  Review $path between $version and $have: check that what $file reads of it is unchanged" >&2
			echo "  (or change $file and the test that pins it)," >&2
		fi
		echo "  then record $have in $list and in the file's header (and wherever the file names the version)." >&2
		fail=1
	fi
	# A nested module builds the library's files with its own build list:
	# a version that differs there was never reviewed against the file.
	if [[ -z "${checked[$module $version]:-}" ]]; then
		checked[$module $version]=1
		for gomod in "${ours[@]}"; do
			other=$(required_version "$module" "$gomod")
			if [[ -n "$other" && "$other" != "$version" ]]; then
				echo "$gomod requires $module $other, but $list records $version ($file and others may follow it)." >&2
				echo "  Keep every module at one version of $module: move $gomod back to $version," >&2
				echo "  or review the listed files against $other and move every module and $list to it." >&2
				fail=1
			fi
		done
	fi
	if [[ ! -f "$file" ]]; then
		echo "$list: $file does not exist; remove or fix its line." >&2
		fail=1
		continue
	fi
	header=$(sed -n '1,/^package /p' "$file")
	if [[ "$kind" == port ]]; then
		wants=("Copyright The Kubernetes Authors" "$module $version" "$path")
	else
		wants=("Reaches into $module $path at $version:")
	fi
	for want in "${wants[@]}"; do
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

# Reaches into private state the list does not name: lines importing
# "unsafe", calling reflect.NewAt or FieldByName, or using //go:linkname,
# in Go files (tracked, or new and not ignored) outside tests and tools/,
# not marked public.
reach_re='^[[:space:]]*(import[[:space:]]+)?([[:alnum:]_.]+[[:space:]]+)?"unsafe"|reflect\.NewAt\(|\.FieldByName\(|//go:linkname'
public_mark='// upstream-versions: public ('
while IFS=: read -r file line text; do
	[[ -n "${reaches[$file]:-}" ]] && continue
	[[ "$text" == *"$public_mark"* ]] && continue
	echo "$file:$line: reaches into another library's private state but is not listed as a reach in $list:" >&2
	echo "  $(sed 's/^[[:space:]]*//' <<<"$text")" >&2
	echo "  List it (module, path, version, reach) with a \"Reaches into ...\" header, or end the line with \"$public_mark<why>)\" if it only reads an exported field of an exported type." >&2
	fail=1
done < <(git grep --untracked -nE "$reach_re" -- '*.go' ':!*_test.go' ':!tools/')

if ((fail)); then
	exit 1
fi
echo "upstream versions: ok ($(grep -v '^\s*\(#\|$\)' "$list" | awk '$5 != "reach"' | wc -l) port entries, $(grep -v '^\s*\(#\|$\)' "$list" | awk '$5 == "reach"' | wc -l) reach entries)"
