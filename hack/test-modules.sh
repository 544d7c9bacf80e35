#!/usr/bin/env bash
# Runs every test of the given modules under the race detector, the modules
# side by side: one `go test` per module, all started at once. Run by make
# test, after go vet (the Makefile passes its MODULES; GO names the go
# command, PKGS the packages of each module, ./... by default).
#
# Why side by side: one module at a time, the run lasts the sum of the
# modules' runs, each about as long as its slowest package (the root's e2e,
# about ten minutes of tests one after another; controllerruntime's
# internal/crsuite, about five; components' e2e), and the cores are not kept
# busy: the root's e2e alone leaves about a fifth of 2 cores idle
# (kube-apiserver start-ups, waits on the watch cache), and crsuite's Ginkgo
# suites wait on their apiservers most of the time. Side by side, each
# module's packages fill the others' gaps. The modules share nothing while
# they run: every test server (internal/testing/apiservertest, and envtest in
# controllerruntime's crsuite) has its own etcd data directory in a
# temporary directory and its own free loopback ports; crsuite's work
# directory, _output/crsuite, and components' binaries,
# _output/components-e2e, belong to one module each; the Go build cache is
# safe for concurrent use. Tests wait longer for their servers when the
# cores are shared: the timeouts are the tests' own, unchanged.
#
# Each module's output goes to a file and is printed whole, under a header,
# when that module ends, so that the modules' logs never interleave. Each
# module's time is printed after its log. The script fails if any module
# fails (every module still runs to its end).
#
# Only packages with tests are handed to go test: it would otherwise build
# the others (components/' kube-scheduler and kube-controller-manager, all
# of Kubernetes) again with -race, which vet has already type-checked and no
# test runs.
set -o pipefail

GO=${GO:-go}
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

logs=$(mktemp -d "${TMPDIR:-/tmp}/boltinformer-test.XXXXXX") || exit 1
modules=("$@")
pids=()

# stop SIGNAL: on SIGINT or SIGTERM, pass it on to each module's process
# group (set -m below: go test and its test binaries), as the terminal's
# Ctrl-C reached them when make ran them in the foreground, then wait.
stop() {
	trap - INT TERM
	for pid in "${pids[@]}"; do
		kill -s "$1" -- "-$pid" 2>/dev/null
	done
	wait
	rm -rf "$logs"
	exit 130
}
trap 'stop INT' INT
trap 'stop TERM' TERM

# first: the slowest packages, by their time under make test on 2 cores,
# slowest first. go test starts its test binaries in the order of its
# arguments, at most -p (the number of cores) at a time, so a slow package
# listed late starts only once the packages before it have started: the
# root module's e2e, which runs one test after another for about ten
# minutes, would start minutes into the run. A package not listed here runs
# after them, in go list's order; one listed that no longer exists is
# skipped.
first=(
	github.com/boltinformer/boltinformer/e2e
	github.com/boltinformer/boltinformer/cache
	github.com/boltinformer/boltinformer/persist
	github.com/boltinformer/boltinformer/cmd/inspect
	github.com/boltinformer/boltinformer/simulation
	github.com/boltinformer/boltinformer/internal/testing/apiservertest
	github.com/boltinformer/boltinformer/controllerruntime/internal/crsuite
	github.com/boltinformer/boltinformer/controllerruntime
	github.com/boltinformer/boltinformer/controllerruntime/examples/widgets
)

# test_module MODULE: go test of every package of MODULE that has tests,
# the slowest first. -vet=off: make test has run go vet, whose default
# checks include those go test runs, on every package of every module (test
# files included; built without -race, which only swaps a file holding one
# constant in cache and in crsuite).
test_module() {
	cd "$1" || return 1
	local pkgs p ordered=()
	# shellcheck disable=SC2086 # PKGS may hold several patterns
	pkgs=$("$GO" list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ${PKGS:-./...}) || return 1
	for p in "${first[@]}"; do
		if grep -qxF -- "$p" <<<"$pkgs"; then
			ordered+=("$p")
		fi
	done
	for p in $pkgs; do
		if ! printf '%s\n' "${first[@]}" | grep -qxF -- "$p"; then
			ordered+=("$p")
		fi
	done
	if [ "${#ordered[@]}" -gt 0 ]; then
		"$GO" test -race -vet=off -count=1 -timeout 60m "${ordered[@]}"
	fi
}

# Module i's output goes to $logs/i.log, and its exit status, once it has
# ended, to $logs/i.status, which the loop below waits for (bash 3 has no
# wait -n).
set -m # each background job in its own process group (see stop)
for i in "${!modules[@]}"; do
	(
		test_module "${modules[$i]}" </dev/null >"$logs/$i.log" 2>&1
		echo $? >"$logs/$i.tmp" && mv "$logs/$i.tmp" "$logs/$i.status"
	) &
	pids[$i]=$!
	started[$i]=$(date +%s)
	echo "go test (${modules[$i]}): started"
done
set +m

failed=()
left=${#modules[@]}
while [ "$left" -gt 0 ]; do
	for i in "${!modules[@]}"; do
		if [ -n "${reported[$i]}" ]; then
			continue
		fi
		if [ ! -e "$logs/$i.status" ]; then
			if kill -0 "${pids[$i]}" 2>/dev/null; then
				continue # still running
			fi
			# Ended without writing its status: killed.
			[ -e "$logs/$i.status" ] || echo "none (killed)" >"$logs/$i.status"
		fi
		reported[$i]=1
		left=$((left - 1))
		rc=$(cat "$logs/$i.status")
		echo
		echo "=== go test (${modules[$i]}) ==="
		cat "$logs/$i.log"
		echo "go test (${modules[$i]}): $(($(date +%s) - started[i])) s, exit status $rc"
		[ "$rc" = 0 ] || failed+=("${modules[$i]}")
	done
	if [ "$left" -gt 0 ]; then
		sleep 1
	fi
done
wait
rm -rf "$logs"
if [ "${#failed[@]}" -gt 0 ]; then
	echo "go test failed in: ${failed[*]}" >&2
	exit 1
fi
