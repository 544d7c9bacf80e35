# boltinformer — build, test, benchmark.
GO        ?= go
PKGS      := ./...
BENCH     ?= .
BENCHTIME ?= 1s

include tools/apiserver.mk

# MODULES: every Go module of the repository that is ours (directories with a
# go.mod, tracked or new), except the build-only modules under tools/, which
# only pin and build tools (etcd, kube-apiserver, staticcheck).
MODULES := $(sort $(patsubst %/,%,$(dir $(shell git ls-files --cached --others --exclude-standard -- go.mod '*/go.mod' | grep -v '^tools/'))))
# TIDY_MODULES: modules whose go.mod must be tidy; tools/apiserver and
# tools/etcd are left as they are (their requirements mirror upstream's).
TIDY_MODULES := $(MODULES) tools/staticcheck

# Tools built from a pinned module under tools/ into _output/bin.
TOOLS_BIN   := $(CURDIR)/_output/bin
STATICCHECK := $(TOOLS_BIN)/staticcheck

.PHONY: all build vet test test-crsuite test-components bench fmt-check fuzz tidy-check staticcheck check-tracked-files check-upstream-versions

all: build

# build: compiles every package of every module and writes nothing. In
# cmd/inspect's module ./... matches one main package, whose binary go build
# would write; -o /dev/null discards it.
build:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) build -o /dev/null $(PKGS)); done

vet:
	@set -e; for m in $(MODULES); do start=$$(date +%s); (cd $$m && $(GO) vet $(PKGS)); \
		echo "go vet ($$m): $$(( $$(date +%s) - start )) s"; done

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# tidy-check: each module's go.mod and go.sum are what go mod tidy makes them.
tidy-check:
	@set -e; for m in $(TIDY_MODULES); do \
		echo "go mod tidy -diff ($$m)"; \
		(cd $$m && $(GO) mod tidy -diff) || { echo "$$m: go.mod/go.sum are not tidy; run (cd $$m && go mod tidy) and commit the result." >&2; exit 1; }; \
	done

$(STATICCHECK): tools/staticcheck/go.mod tools/staticcheck/go.sum
	@mkdir -p $(TOOLS_BIN)
	cd tools/staticcheck && GOWORK=off $(GO) build -o $@ honnef.co/go/tools/cmd/staticcheck

# staticcheck: honnef.co/go/tools at the version pinned in tools/staticcheck,
# default checks, on every module. Silence a finding only with a
# //lint:ignore CHECK reason comment on the line.
staticcheck: $(STATICCHECK)
	@set -e; for m in $(MODULES); do start=$$(date +%s); (cd $$m && $(STATICCHECK) $(PKGS)); \
		echo "staticcheck ($$m): $$(( $$(date +%s) - start )) s"; done

# check-tracked-files: no built binaries or files over 1 MB in git.
check-tracked-files:
	@bash hack/check-tracked-files.sh

# check-upstream-versions: the files ported from Kubernetes, and those that
# reach into another library's private state, follow the versions of those
# libraries the repository builds with (hack/upstream-versions.txt).
check-upstream-versions:
	@bash hack/check-upstream-versions.sh

# make test: what CI runs. Repository checks, formatting, tidiness, vet,
# staticcheck, then every test of every module — unit, differential, crash
# and end-to-end against a real kube-apiserver (built on first use) — under
# the race detector (hack/test-modules.sh). The modules' go test run side by
# side, each module's slowest packages first; each module's output is
# printed whole when that module ends, with its time, and any module
# failing fails make test. go test's own vet checks are off: go vet has run
# them, and more, on every package. Only packages with tests are handed to
# go test: it would otherwise build the others (components/' kube-scheduler
# and kube-controller-manager, all of Kubernetes) again with -race, which
# vet has already type-checked and no test runs.
test: check-tracked-files check-upstream-versions fmt-check tidy-check vet staticcheck test-binaries
	@GO='$(GO)' PKGS='$(PKGS)' bash hack/test-modules.sh $(MODULES)

# make test-components: the end-to-end tests of kube-scheduler and
# kube-controller-manager on boltinformer (components/e2e); make test runs
# them too.
test-components: test-binaries
	cd components && $(GO) test -count=1 -timeout 30m -v ./e2e

# make test-crsuite: controller-runtime v0.25.2's own pkg/controller (cold)
# and pkg/cache (cold and warm) suites with every cache routed through the
# persistent cache (controllerruntime/internal/crsuite), under the race
# detector; make test runs them too. The counts are in the output.
test-crsuite: test-binaries
	cd controllerruntime && $(GO) test -race -count=1 -timeout 60m -v -run '^TestControllerRuntimeSuites$$' ./internal/crsuite

# make simulate: the seeded simulation of the whole informer
# (simulation, docs/simulation.md) on SEEDS seeds from FIRST, under
# the race detector; make test runs its default 60. SEED=n reruns one seed
# (a failure prints the command); SHRINK is the time spent shrinking the
# failing schedules.
SEEDS  ?= 500
FIRST  ?= 0
SHRINK ?= 2m
.PHONY: simulate
simulate:
	$(GO) test -race -count=1 -timeout 120m ./simulation -run '^TestSimulation$$' \
		-simulation.seeds=$(SEEDS) -simulation.first=$(FIRST) -simulation.shrink=$(SHRINK) \
		$(if $(SEED),-simulation.seed=$(SEED) -v)

# make fuzz: each fuzz target for FUZZTIME (their seed corpora already run in
# make test): record decoding never panics; random indexer operations agree
# with client-go's indexer.
FUZZTIME ?= 2m
fuzz:
	$(GO) test ./persist -run '^$$' -fuzz '^FuzzCodecDecode$$' -fuzztime $(FUZZTIME)
	$(GO) test ./cache -run '^$$' -fuzz '^FuzzIndexerAgainstClientGo$$' -fuzztime $(FUZZTIME)

# make bench: storage and codec benchmarks, each beside its client-go (or
# protobuf) reference in the same run, followed by a table of ratios. The
# storage benchmarks are in bench/, a module of its own.
bench:
	{ $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) ./persist/; \
	  cd bench && $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) .; } | awk -f hack/bench-ratios.awk

# --- Side by side with client-go against a real kube-apiserver ---
DEMO_PODS   ?= 3000
DEMO_REPS   ?= 5
DEMO_POD_SIZE ?= realistic
DEMO_DIR    ?= $(CURDIR)/_output/demo
BENCH_SIZES ?= 100k
BENCH_REPS  ?= 3
BENCH_FLAGS ?=

.PHONY: demo bench-informer

# make demo: starts etcd + kube-apiserver on loopback (built on first use),
# creates $(DEMO_PODS) Pods ($(DEMO_POD_SIZE): or small), warms the watch
# cache up, and runs client-go's cold start in protobuf beside
# boltinformer's cold start and warm restart (with Recovery and
# WarmListBelow, as the typed factory's informer with that option), each in
# its own process, $(DEMO_REPS) times with the order rotated between
# repetitions; then one restart after a 410 that recovers by what changed and one
# without Recovery (the full relist), and inspect reads a hot snapshot of
# the cache file. Leaves nothing running. A few minutes on 2 cores.
demo: test-binaries
	@rm -rf '$(DEMO_DIR)' && mkdir -p '$(DEMO_DIR)'
	@cd bench && $(GO) run ./cmd/informerbench demo --pods $(DEMO_PODS) --reps $(DEMO_REPS) --pod-size $(DEMO_POD_SIZE) --snapshot '$(DEMO_DIR)/cache-snapshot.db'
	@echo; echo '$$ inspect ls cache-snapshot.db'
	@cd cmd/inspect && $(GO) run . ls '$(DEMO_DIR)/cache-snapshot.db'
	@echo; echo '$$ inspect get pods -f cache-snapshot.db -n bench-00 -o wide'
	@cd cmd/inspect && $(GO) run . get pods -f '$(DEMO_DIR)/cache-snapshot.db' -n bench-00 -o wide > '$(DEMO_DIR)/get.txt'
	@head -11 '$(DEMO_DIR)/get.txt'; echo "… $$(($$(wc -l < '$(DEMO_DIR)/get.txt') - 1)) Pods in bench-00"
	@rm -rf '$(DEMO_DIR)'

# make bench-components: restarts of kube-scheduler and
# kube-controller-manager on boltinformer beside the stock binaries
# (components/bench/restartbench) with COMPONENTS_PODS Pods per component.
COMPONENTS_PODS ?= 10000
COMPONENTS_NODES ?= 100
.PHONY: bench-components
bench-components: test-binaries
	cd components && $(GO) run ./bench/restartbench --pods $(COMPONENTS_PODS) --nodes $(COMPONENTS_NODES) --reps $(BENCH_REPS)

# make bench-checkpoints: restarts of a controller-runtime manager with
# CHECKPOINT_CHANGED of CHECKPOINT_PODS Pods changed while it was down, on
# controller-runtime's default cache and with a boltcr checkpoint
# (controllerruntime/bench/checkpointbench).
CHECKPOINT_PODS ?= 10000
CHECKPOINT_CHANGED ?= 0,100,1000
.PHONY: bench-checkpoints
bench-checkpoints: test-binaries
	cd controllerruntime && $(GO) run ./bench/checkpointbench --pods $(CHECKPOINT_PODS) --changed $(CHECKPOINT_CHANGED) --reps $(BENCH_REPS)

# Every bench harness writes its results (JSON, with the text and plots it
# renders from them) under _output/bench/, which git ignores; commit the
# .txt and .svg summaries worth keeping under bench/results/. To render a
# result again: go -C bench run ./cmd/benchreport ../_output/bench/…/NAME.json

# make bench-informer: the full side-by-side benchmark (bench/cmd/informerbench)
# at $(BENCH_SIZES) Pods; results and the sync-time plot in _output/bench/informerbench/.
# About 30 minutes at 100k on 2 cores. BENCH_SIZES=10k,50k,100k plots a curve.
bench-informer: test-binaries
	cd bench && $(GO) run ./cmd/informerbench --sizes $(BENCH_SIZES) --reps $(BENCH_REPS) $(BENCH_FLAGS)

# make bench-recover: restarts after a downtime longer than the watch
# history (informerbench recover) at $(RECOVER_PODS) Pods: boltinformer
# recovering by what changed, its full-relist fallback and client-go's cold
# starts, with $(RECOVER_CHANGED) of the Pods changed while down, each start
# after an apiserver restart; results in _output/bench/informerbench/recover-changed-*.
# make bench-recover-downtime: time to synced against downtime
# ($(RECOVER_DOWNTIMES), emulated at $(RECOVER_RATE) Pod writes/s), both
# informers; _output/bench/informerbench/recover-downtime-*.{txt,svg}.
RECOVER_PODS      ?= 100000
RECOVER_CHANGED   ?= 0.1%,1%,10%
RECOVER_DOWNTIMES ?= 0,20s,60s,2m,5m,10m,30m
RECOVER_RATE      ?= 20
RECOVER_FLAGS     ?=
.PHONY: bench-recover bench-recover-downtime
bench-recover: test-binaries
	cd bench && $(GO) run ./cmd/informerbench recover --pods $(RECOVER_PODS) --changed $(RECOVER_CHANGED) --reps $(BENCH_REPS) $(RECOVER_FLAGS)
bench-recover-downtime: test-binaries
	cd bench && $(GO) run ./cmd/informerbench recover --pods $(RECOVER_PODS) --downtimes $(RECOVER_DOWNTIMES) --rate $(RECOVER_RATE) --reps $(BENCH_REPS) $(RECOVER_FLAGS)

# make bench-churn: the steady-state bench (informerbench churn): both
# informers side by side on $(CHURN_PODS) Pods while they change at 100/s
# (80% updates, 10% creates, 10% deletes) for $(CHURN_DURATION); CPU, bytes
# written, private memory over time and event-to-handler latency. Results
# and plots in _output/bench/churn-<pods>/. CHURN_FLAGS="--rate 200" etc.;
# CHURN_FLAGS="--bounded 1000" adds a boltinformer with a 1,000-object cache,
# CHURN_FLAGS="--skew zipf:1.1" makes a few Pods take most updates.
CHURN_PODS     ?= 100000
CHURN_DURATION ?= 10m
CHURN_FLAGS    ?=
.PHONY: bench-churn
bench-churn: test-binaries
	cd bench && $(GO) run ./cmd/informerbench churn --pods $(CHURN_PODS) --duration $(CHURN_DURATION) $(CHURN_FLAGS)

# make bench-steady: the whole steady-state table (informerbench steady):
# the churn above at each of $(STEADY_SIZES) Pods in turn on one apiserver,
# twice, $(STEADY_DURATION) each: updates picking Pods uniformly (the
# default and worst case), then by zipf:1.1 (a few hot Pods). Each churn has
# boltinformer-bounded caching 1% of the Pods, client-go's LIST cold start
# beside its watch-list one, and read prices (Get, ByIndex, List) timed in
# each child after it. It first prints the targets; then one table of every
# figure over client-go's for each churn, marked against them: private
# memory, CPU, Go bytes allocated per event and per object of a cold start,
# bytes written per event over the record, the file over its records. About
# 90 minutes at the defaults on 2 cores. Results in _output/bench/steady/,
# each churn in churn-<pods>[-zipf1.1]/ there. STEADY_FLAGS="--rate 200",
# STEADY_FLAGS="--skews uniform" etc.
STEADY_SIZES    ?= 3k,30k,100k
STEADY_DURATION ?= 10m
STEADY_FLAGS    ?=
.PHONY: bench-steady
bench-steady: test-binaries
	cd bench && $(GO) run ./cmd/informerbench steady --sizes $(STEADY_SIZES) --duration $(STEADY_DURATION) $(STEADY_FLAGS)
