# Real etcd + kube-apiserver binaries for end-to-end tests and benchmarks
# (internal/testing/apiservertest). Included by the root Makefile.
#
# The directory defaults to _output/bin and honours BOLTINFORMER_TEST_BIN_DIR;
# it is exported so that `go test` run by make looks in the same place.
TEST_BIN_DIR := $(or $(BOLTINFORMER_TEST_BIN_DIR),$(CURDIR)/_output/bin)
export BOLTINFORMER_TEST_BIN_DIR := $(TEST_BIN_DIR)

.PHONY: test-binaries
test-binaries: ## Build etcd and kube-apiserver for e2e tests (first run ~6 min)
	bash "$(CURDIR)/hack/build-test-binaries.sh"
