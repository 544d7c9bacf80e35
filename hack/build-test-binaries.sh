#!/usr/bin/env bash
# Builds the real kube-apiserver and etcd used by end-to-end tests
# (internal/testing/apiservertest) into _output/bin, from Go modules only.
#
# Each binary comes from its own build-only module under tools/ so that the
# library's go.mod never sees k8s.io/kubernetes or its replace directives.
# A binary is rebuilt only when missing or older than its module's go.mod/go.sum.
#
# Env: BOLTINFORMER_TEST_BIN_DIR overrides the output directory.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${BOLTINFORMER_TEST_BIN_DIR:-$root/_output/bin}"
mkdir -p "$out"

# The tools modules are not part of any workspace; a go.work would reject them.
export GOWORK=off
# Static pure-Go binaries, as upstream ships them: no C toolchain needed.
# With -trimpath the output is byte-identical across checkouts and machines
# of the same GOOS/GOARCH and Go version.
export CGO_ENABLED=0

kube_version=v1.37.2
etcd_version=v3.7.0

# up_to_date BIN MODDIR: BIN exists and is newer than MODDIR/go.mod and go.sum.
up_to_date() {
	[[ -x "$1" && "$1" -nt "$2/go.mod" && "$1" -nt "$2/go.sum" ]]
}

# build NAME VERSION COLD_TIME MODDIR PKG [GO BUILD ARGS...]
build() {
	local name=$1 version=$2 cold=$3 moddir=$4 pkg=$5
	shift 5
	local bin="$out/$name"
	if up_to_date "$bin" "$moddir"; then
		echo "$name $version: up to date ($bin)"
		return
	fi
	echo "building $name $version (first run takes ~$cold)…"
	local start=$SECONDS
	# Build to a temporary name and rename, so an interrupted build never
	# leaves a truncated binary that looks up to date.
	(cd "$moddir" && go build -buildvcs=false -o "$bin.tmp" "$@" "$pkg")
	mv -f "$bin.tmp" "$bin"
	echo "built $name $version in $((SECONDS - start))s -> $bin"
}

build etcd "$etcd_version" "1 min" "$root/tools/etcd" go.etcd.io/etcd/server/v3 \
	-trimpath -ldflags "-s -w"

v=k8s.io/component-base/version
build kube-apiserver "$kube_version" "6 min" "$root/tools/apiserver" k8s.io/kubernetes/cmd/kube-apiserver \
	-trimpath -ldflags "-s -w -X $v.gitVersion=$kube_version -X $v.gitMajor=1 -X $v.gitMinor=37 -X $v.gitTreeState=clean"
