# boltinformer — build, test, benchmark.
GO        ?= go
PKGS      := ./...
# Packages with goroutines and locks: always tested under the race detector.
RACE_PKGS := ./persist/... ./cache/...
BENCH     ?= .
BENCHTIME ?= 1s

-include tools/apiserver.mk

.PHONY: all build vet test test-unit test-race bench fmt-check

all: build

build:
	$(GO) build $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

test-unit:
	$(GO) test -count=1 $(PKGS)

test-race:
	$(GO) test -race -count=1 $(RACE_PKGS)

# make test: what CI runs. vet, formatting, every test, and the race detector
# over the concurrent packages.
test: fmt-check vet test-unit test-race

bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) ./persist/ ./cache/ ./bench/...
