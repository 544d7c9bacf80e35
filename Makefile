# boltinformer — build, test, benchmark.
GO        ?= go
PKGS      := ./...
BENCH     ?= .
BENCHTIME ?= 1s

include tools/apiserver.mk

.PHONY: all build vet test bench fmt-check fuzz

all: build

build:
	$(GO) build $(PKGS)

vet:
	$(GO) vet $(PKGS)
	cd controllerruntime && $(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# make test: what CI runs. Formatting, vet, then every test — unit,
# differential, crash and end-to-end against a real kube-apiserver (built on
# first use) — under the race detector.
test: fmt-check vet test-binaries
	$(GO) test -race -count=1 -timeout 60m $(PKGS)
	cd controllerruntime && $(GO) test -race -count=1 -timeout 30m ./...

# make fuzz: each fuzz target for FUZZTIME (their seed corpora already run in
# make test): record decoding never panics; random indexer operations agree
# with client-go's indexer.
FUZZTIME ?= 2m
fuzz:
	$(GO) test ./persist -run '^$$' -fuzz '^FuzzCodecDecode$$' -fuzztime $(FUZZTIME)
	$(GO) test ./cache -run '^$$' -fuzz '^FuzzIndexerAgainstClientGo$$' -fuzztime $(FUZZTIME)

# make bench: storage and codec benchmarks, each beside its client-go (or
# protobuf) reference in the same run, followed by a table of ratios.
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) ./persist/ ./bench/ | awk -f hack/bench-ratios.awk

# --- Side by side with client-go against a real kube-apiserver (issue #6) ---
DEMO_PODS   ?= 3000
DEMO_REPS   ?= 3
DEMO_POD_SIZE ?= realistic
DEMO_DIR    ?= $(CURDIR)/_output/demo
BENCH_SIZES ?= 100k
BENCH_REPS  ?= 3
BENCH_FLAGS ?=

.PHONY: demo bench-informer

# make demo: starts etcd + kube-apiserver on loopback (built on first use),
# creates $(DEMO_PODS) Pods ($(DEMO_POD_SIZE): or small), warms the watch
# cache up, and runs client-go's cold start in protobuf (the headline) and
# JSON beside boltinformer's cold start and warm restart, each in its own
# process, $(DEMO_REPS) times with the order reversed every other time; then
# one restart after a 410, and inspect reads a hot snapshot of the cache
# file. Leaves nothing running. A few minutes on 2 cores.
demo: test-binaries
	@rm -rf '$(DEMO_DIR)' && mkdir -p '$(DEMO_DIR)'
	@$(GO) run ./bench/cmd/informerbench demo --pods $(DEMO_PODS) --reps $(DEMO_REPS) --pod-size $(DEMO_POD_SIZE) --snapshot '$(DEMO_DIR)/cache-snapshot.db'
	@echo; echo '$$ inspect ls cache-snapshot.db'
	@$(GO) run ./cmd/inspect ls '$(DEMO_DIR)/cache-snapshot.db'
	@echo; echo '$$ inspect get pods -f cache-snapshot.db -n bench-00 -o wide'
	@$(GO) run ./cmd/inspect get pods -f '$(DEMO_DIR)/cache-snapshot.db' -n bench-00 -o wide > '$(DEMO_DIR)/get.txt'
	@head -11 '$(DEMO_DIR)/get.txt'; echo "… $$(($$(wc -l < '$(DEMO_DIR)/get.txt') - 1)) Pods in bench-00"
	@rm -rf '$(DEMO_DIR)'

# make bench-informer: the full side-by-side benchmark (bench/cmd/informerbench)
# at $(BENCH_SIZES) Pods; results in bench/results/, plot in docs/sync-time.svg.
# About 30 minutes at 100k on 2 cores. BENCH_SIZES=10k,50k,100k plots a curve.
bench-informer: test-binaries
	$(GO) run ./bench/cmd/informerbench --sizes $(BENCH_SIZES) --reps $(BENCH_REPS) $(BENCH_FLAGS)
