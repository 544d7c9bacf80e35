# boltinformer — build, test, benchmark.
GO        ?= go
PKGS      := ./...
BENCH     ?= .
BENCHTIME ?= 1s

include tools/apiserver.mk

.PHONY: all build vet test bench fmt-check

all: build

build:
	$(GO) build $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# make test: what CI runs. Formatting, vet, then every test — unit,
# differential, crash and end-to-end against a real kube-apiserver (built on
# first use) — under the race detector.
test: fmt-check vet test-binaries
	$(GO) test -race -count=1 -timeout 60m $(PKGS)

# make bench: storage and codec benchmarks, each beside its client-go (or
# protobuf) reference in the same run, followed by a table of ratios.
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) ./persist/ ./bench/ | awk -f hack/bench-ratios.awk
