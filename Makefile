# ctrlkit — every target builds what it needs; nothing is installed by hand.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO ?= go
BIN := $(CURDIR)/bin
# A KUBEBUILDER_ASSETS from setup-envtest is used as is; otherwise the
# control plane is built from Go modules into bin/k8s (hack/envtest).
ENVTEST_DIR := $(if $(KUBEBUILDER_ASSETS),$(KUBEBUILDER_ASSETS),$(BIN)/k8s)
UNIT_PKGS = $$($(GO) list ./... | grep -v -e /test/e2e -e /examples/)

.PHONY: help
help: ## Show the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build every package and the example operators
	$(GO) build ./...

.PHONY: envtest
envtest: ## Build kube-apiserver and etcd for envtest into bin/k8s (skipped when KUBEBUILDER_ASSETS is set)
ifeq ($(KUBEBUILDER_ASSETS),)
	hack/envtest/build.sh $(BIN)/k8s
else
	@echo "envtest: using KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS)"
endif

.PHONY: test
test: unit e2e ## Run every unit test with -race, then the e2e tests under envtest

.PHONY: unit
unit: ## Run the unit tests with -race
	$(GO) test -race -count=1 $(UNIT_PKGS)

.PHONY: e2e
e2e: envtest ## Run the e2e tests against a real kube-apiserver and etcd
	KUBEBUILDER_ASSETS=$(ENVTEST_DIR) $(GO) test -race -count=1 -timeout 15m ./test/e2e/... ./examples/...

.PHONY: lint
lint: ## go vet and a gofmt check
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: demo
demo: ## Start a local control plane, run the nsdefaults example operator on it, and show it reconciling (KUBECONFIG=... targets a real cluster, DEMO_KEEP=1 keeps it running)
ifeq ($(KUBECONFIG),)
	@$(MAKE) --no-print-directory envtest
endif
	$(GO) build -o $(BIN)/nsdefaults ./examples/nsdefaults
	$(GO) build -o $(BIN)/demo ./hack/demo
	KUBEBUILDER_ASSETS=$(ENVTEST_DIR) OPERATOR=$(BIN)/nsdefaults $(BIN)/demo

.PHONY: clean
clean: ## Remove bin/ (including the built control plane)
	rm -rf $(BIN)
