# ctrlkit — every target builds what it needs; nothing is installed by hand.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO ?= go
BIN := $(CURDIR)/bin
# A KUBEBUILDER_ASSETS from setup-envtest is used as is; otherwise the
# control plane is built from Go modules into bin/k8s (hack/envtest).
ENVTEST_DIR := $(if $(KUBEBUILDER_ASSETS),$(KUBEBUILDER_ASSETS),$(BIN)/k8s)

# The library is the root module; the modules beside it hold what needs
# controller-runtime or tools, and go.work joins them (docs/modules.md).
MODULES := . bench cmd/ctrlkit examples hack test
# Tools pinned in hack/tools/go.mod, built from source into bin/.
TOOLS_MOD := $(CURDIR)/hack/tools/go.mod
STATICCHECK := $(BIN)/staticcheck
CONTROLLER_GEN := $(BIN)/controller-gen
APIDIFF := $(BIN)/apidiff

.PHONY: help
help: ## Show the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build every package of every module, the example operators included
	for m in $(MODULES); do (cd $$m && $(GO) build -o /dev/null ./...) || exit 1; done

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
unit: ## Run the unit tests with -race (the library outside the workspace, against its own go.mod), each fuzz target on FUZZTIME inputs, and check the library's dependency graph
	GOWORK=off $(GO) test -race -count=1 ./...
	$(GO) test -race -count=1 -skip '^TestNewProjectE2E$$' ./bench/... ./cmd/ctrlkit/...
	$(GO) test -count=1 ./test/modgraph/
	@$(MAKE) --no-print-directory fuzz

# How many inputs make fuzz (and so make test) runs each fuzz target on. A count,
# not a duration: with a duration, go1.26's fuzz coordinator can report its own
# deadline as a failure ("context deadline exceeded", no crasher; golang/go#75804).
FUZZTIME ?= 20000x

.PHONY: fuzz
fuzz: ## Run every native fuzz target of the library on FUZZTIME inputs each (20000x by default); plain go test runs their checked-in corpora (testdata/fuzz)
	@for f in $$(git grep -l '^func Fuzz' -- 'pkg/*_test.go' 'internal/*_test.go'); do \
		for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "fuzz ./$$(dirname $$f) $$t on $(FUZZTIME) inputs"; \
			GOWORK=off $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) ./$$(dirname $$f) || exit 1; \
		done; \
	done

.PHONY: e2e
e2e: envtest ## Run the e2e tests against a real kube-apiserver and etcd
	KUBEBUILDER_ASSETS=$(ENVTEST_DIR) $(GO) test -race -count=1 -timeout 15m ./pkg/envtest/... ./test/e2e/... ./test/ha/... ./test/applydiff/... ./examples/...
	KUBEBUILDER_ASSETS=$(ENVTEST_DIR) $(GO) test -count=1 -timeout 30m -run '^TestNewProjectE2E$$' ./cmd/ctrlkit/

.PHONY: lint
lint: vet fmt-check staticcheck tidy-check verify-generate size-check api-check ## Every check a reviewer makes: go vet, gofmt, staticcheck, go mod tidy, generated files, file sizes, API compatibility

.PHONY: vet
vet: ## go vet every module
	for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

.PHONY: fmt-check
fmt-check: ## Fail if a tracked Go file is not gofmt'ed
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed (run gofmt -w on these):"; echo "$$out"; exit 1; fi

.PHONY: staticcheck
staticcheck: $(STATICCHECK) ## staticcheck every module (pinned in hack/tools)
	for m in $(MODULES); do (cd $$m && $(STATICCHECK) ./...) || exit 1; done

.PHONY: tidy-check
tidy-check: ## Fail if go mod tidy would change any module's go.mod or go.sum
	@for m in $(MODULES) hack/tools hack/envtest/apiserver hack/envtest/etcd; do \
		(cd $$m && GOWORK=off $(GO) mod tidy -diff) || { echo "go.mod/go.sum of $$m are not tidy: run (cd $$m && GOWORK=off go mod tidy)"; exit 1; }; \
	done

.PHONY: api-check
api-check: $(APIDIFF) ## Fail if the library's exported API changed incompatibly since the last release tag (or API_BASE=<revision>) without being accepted in hack/apidiff-accepted.txt (hack/apicheck.sh)
	hack/apicheck.sh $(APIDIFF)

.PHONY: size-check
size-check: ## Fail if git tracks a file over 1 MiB or an executable (hack/check-size.sh)
	hack/check-size.sh

$(STATICCHECK): hack/tools/go.mod hack/tools/go.sum
	GOWORK=off $(GO) build -modfile=$(TOOLS_MOD) -o $@ honnef.co/go/tools/cmd/staticcheck

$(APIDIFF): hack/tools/go.mod hack/tools/go.sum
	GOWORK=off $(GO) build -modfile=$(TOOLS_MOD) -o $@ golang.org/x/exp/cmd/apidiff

$(CONTROLLER_GEN): hack/tools/go.mod hack/tools/go.sum
	GOWORK=off $(GO) build -modfile=$(TOOLS_MOD) -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

.PHONY: bench
bench: ## Benchmark ctrlkit's queue side by side with client-go's and controller-runtime's and print the tables (bench/README.md; raw output in bin/bench.txt)
	@mkdir -p $(BIN)
	for pass in 1 2 3 4 5; do $(GO) test -run '^$$' -bench '^BenchmarkQueue$$' -benchmem -count=1 -benchtime=200000x ./bench/ || exit 1; done | tee $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench '^BenchmarkLatency$$' -benchmem -count=1 -benchtime=1x ./bench/ | tee -a $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench '^BenchmarkLatencyLong$$' -count=1 -benchtime=1x ./bench/ | tee -a $(BIN)/bench.txt
	@echo
	@$(GO) run ./bench/cmd/benchtable < $(BIN)/bench.txt
	@echo; echo "### Memory a queue keeps after a 50,000-key backlog drained (B per key of the peak)"
	@$(GO) test -run '^$$' -bench '^BenchmarkRetained$$' -count=1 -benchtime=1x ./bench/ | grep '^BenchmarkRetained' | tee -a $(BIN)/bench.txt

.PHONY: demo
demo: ## Start a local control plane, install the Website CRD, run the website example operator on it, and show it reconciling (KUBECONFIG=... targets a real cluster, DEMO_KEEP=1 keeps it running)
ifeq ($(KUBECONFIG),)
	@$(MAKE) --no-print-directory envtest
endif
	$(GO) build -o $(BIN)/website ./examples/website
	$(GO) build -o $(BIN)/demo ./hack/demo
	KUBEBUILDER_ASSETS=$(ENVTEST_DIR) OPERATOR=$(BIN)/website CRDS=$(CURDIR)/examples/website/config/crd $(BIN)/demo

WEBSITE_API := ./examples/website/api/...
WEBSITE_CRDS := examples/website/config/crd
WEBSITE_AC := examples/website/api/v1alpha1/applyconfiguration
CRONJOB_API := ./examples/cronjob/api/...
CRONJOB_CRDS := examples/cronjob/config/crd

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate the website example's deepcopy code, apply configurations and CRD manifest, and the cronjob example's deepcopy code and CRD manifest with controller-gen (pinned in hack/tools)
	rm -rf $(WEBSITE_AC)
	$(CONTROLLER_GEN) object applyconfiguration paths=$(WEBSITE_API) crd output:crd:dir=$(WEBSITE_CRDS)
	$(CONTROLLER_GEN) object paths=$(CRONJOB_API) crd output:crd:dir=$(CRONJOB_CRDS)

.PHONY: verify-generate
verify-generate: $(CONTROLLER_GEN) ## Check that the committed generated files are what `make generate` writes
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(CONTROLLER_GEN) object paths=$(WEBSITE_API) output:object:dir=$$tmp/object crd output:crd:dir=$$tmp/crd; \
	$(CONTROLLER_GEN) object paths=$(CRONJOB_API) output:object:dir=$$tmp/cronjob-object crd output:crd:dir=$$tmp/cronjob-crd; \
	mv $(WEBSITE_AC) $$tmp/ac-committed; \
	$(CONTROLLER_GEN) applyconfiguration paths=$(WEBSITE_API); \
	ok=true; diff -u examples/website/api/v1alpha1/zz_generated.deepcopy.go $$tmp/object/zz_generated.deepcopy.go && \
		diff -ru $(WEBSITE_CRDS) $$tmp/crd && diff -ru $$tmp/ac-committed $(WEBSITE_AC) && \
		diff -u examples/cronjob/api/v1/zz_generated.deepcopy.go $$tmp/cronjob-object/zz_generated.deepcopy.go && \
		diff -ru $(CRONJOB_CRDS) $$tmp/cronjob-crd || ok=false; \
	rm -rf $(WEBSITE_AC); mv $$tmp/ac-committed $(WEBSITE_AC); \
	$$ok || { echo "generated files are stale: run make generate"; exit 1; }
	@echo "generated files are up to date"

.PHONY: clean
clean: ## Remove bin/ (including the built control plane)
	rm -rf $(BIN)

.PHONY: bench-e2e
bench-e2e: envtest ## Compare ctrlkit with controller-runtime end to end on one envtest control plane (cold start at 10k and 50k ConfigMaps, churn latency at 100/200/400 writes/s, write latency with read-your-own-writes on and off beside controller-runtime and client-go, restart storm with 1ms and 10ms Reconciles, heap for ConfigMaps and Pods, CPU) then a fan-out operator (100 sources each copied to 10 namespaces: time to converge, update latency, writes), and write bench/results/latest.md, latency.svg, storm.svg and fanout.md (~20 min; -only storm via BENCH_ARGS, BENCH_N=2000,4000 for a quick look; bench/e2e/README.md)
	KUBEBUILDER_ASSETS=$(ENVTEST_DIR) $(GO) run ./bench/e2e -out $(CURDIR)/bench/results $(BENCH_ARGS)
	KUBEBUILDER_ASSETS=$(ENVTEST_DIR) $(GO) run ./bench/cmd/fanout -out $(CURDIR)/bench/results

.PHONY: bench-shard
bench-shard: envtest ## Run 1, 2, 3 and 4 sharded replicas as processes over 10,000 ConfigMaps on one envtest control plane: capacity at p99 queue time <= 1s, heap per replica, handover after a scale-up and a kill -9, against issue 15's targets; writes bench/results/shard.md and shard.svg (~45 min; BENCH_ARGS='-quick -out /tmp/shard' for a look in two minutes; bench/shard/README.md)
	KUBEBUILDER_ASSETS=$(ENVTEST_DIR) $(GO) run ./bench/shard -out $(CURDIR)/bench/results $(BENCH_ARGS)
