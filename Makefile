# gangbench developer and user entry points. `make help` lists them.
SHELL := /usr/bin/env bash
GO ?= go
K8S_VERSION ?= v1.37.2
# The previous minor, served as scheduling.k8s.io/v1alpha2: the cross-version comparison test uses it.
PREV_K8S_VERSION ?= v1.36.3
NODES ?= 4
GPUS ?= 8
NAME ?= gangbench
# make perf judges the shipped SLO file unless told otherwise (SLO= for the built-in invariants only).
SLO ?= default
BIN := _output/bin/gangbench
# Integration tests start real control planes; the first run may also build the binaries. The full
# run includes every -short test (none is short-only), so make test runs them once, not twice.
TEST_TIMEOUT ?= 80m
# The packages make test runs (a subset such as ./perf/... to try one area with its time table).
TEST_PKGS ?= ./...
# How many parallel tests run at once. The only parallel tests that start clusters are the suites'
# proofs against wrong builds (red runs): each waits out bounded windows most of its time, so three
# share 2 cores without a pristine run among them (those run before, alone). Go's default is GOMAXPROCS.
TEST_PARALLEL ?= 3

.DEFAULT_GOAL := help

##@ Use

.PHONY: cluster
cluster: $(if $(filter kind,$(PROVIDER)),deps) build ## Create a cluster (NODES, GPUS, NAME; local unless PROVIDER=kind) and leave it running
	$(BIN) cluster create --name $(NAME) --nodes $(NODES) --gpus-per-node $(GPUS) --k8s-version $(K8S_VERSION) $(if $(PROVIDER),--provider $(PROVIDER))

.PHONY: e2e
e2e: deps build k8s-build ## Run the conformance suites on a fresh cluster (PROVIDER=kind|local, SUITES=barriers,preemption, E2E_FLAGS=...)
	$(BIN) e2e --k8s-version $(K8S_VERSION) $(if $(PROVIDER),--provider $(PROVIDER)) $(if $(SUITES),--suites $(SUITES)) $(E2E_FLAGS)

.PHONY: coverage
coverage: build k8s-build ## The suites against a coverage-instrumented scheduler on local; the gang code's coverage into COVERAGE_DIR (default _output/coverage)
	$(BIN) e2e --k8s-version $(K8S_VERSION) --provider local --scheduler-coverage $(or $(COVERAGE_DIR),_output/coverage) $(if $(SUITES),--suites $(SUITES)) $(E2E_FLAGS)

.PHONY: perf
perf: deps build k8s-build ## Throughput benchmarks: default scenario set on NODES simulated 8-GPU nodes (PROVIDER=kind, SCENARIOS=…, SLO=file, PERF_FLAGS=…)
	$(BIN) perf run --k8s-version $(K8S_VERSION) $(if $(PROVIDER),--provider $(PROVIDER)) $(if $(filter command line,$(origin NODES)),--nodes $(NODES)) $(if $(SCENARIOS),--scenario $(SCENARIOS)) $(if $(SLO),--slo $(SLO)) $(PERF_FLAGS)

.PHONY: compare
compare: deps build k8s-build ## Compare two schedulers: OLD=v1.37.1 NEW=v1.37.2 (or OLD_BIN=… NEW_BIN=…, PROVIDER=kind), interleaved, with statistics
	$(BIN) compare $(if $(PROVIDER),--provider $(PROVIDER)) $(if $(OLD),--old-version $(OLD)) $(if $(NEW),--new-version $(NEW)) $(if $(OLD_BIN),--old-scheduler-binary $(OLD_BIN)) $(if $(NEW_BIN),--new-scheduler-binary $(NEW_BIN)) $(COMPARE_FLAGS)

.PHONY: lab
lab: deps build k8s-build ## The seed's gang-scheduling lab, literally, with a verdict per experiment (PROVIDER=kind|local)
	$(BIN) lab --k8s-version $(K8S_VERSION) $(if $(PROVIDER),--provider $(PROVIDER))

.PHONY: cluster-delete
cluster-delete: build ## Delete the cluster NAME
	$(BIN) cluster delete --name $(NAME)

.PHONY: k8s-build
k8s-build: build ## Build and cache the Kubernetes binaries for K8S_VERSION (about 20 min cold on 2 cores)
	$(BIN) k8s build --version $(K8S_VERSION)

.PHONY: k8s-build-prev
k8s-build-prev: build ## Build and cache the binaries of PREV_K8S_VERSION (v1.36, for comparisons across minor versions)
	$(BIN) k8s build --version $(PREV_K8S_VERSION)

.PHONY: doctor
doctor: build ## Which providers can run here, and why not
	$(BIN) doctor

##@ Develop

.PHONY: build
build: ## Build the gangbench CLI into _output/bin
	$(GO) build -trimpath -o $(BIN) ./cmd/gangbench

# make test runs every test through tools/testtimes: the output is what plain `go test` prints, the
# events land in $(TEST_OUT)/events.json, and the run ends with the packages and the slowest tests by
# time (also when a step failed), so each change to the tests shows its cost.
TEST_OUT := _output/test

.PHONY: test
test: k8s-build test-node-image ## Everything CI runs: vet, unit tests, integration tests on real local and (when an engine answers) kind clusters, fuzzing, then a time table
	$(GO) vet ./...
	@$(MAKE) --no-print-directory timed-tests

.PHONY: test-long
test-long: k8s-build k8s-build-prev test-node-image ## make test plus what repeats its proofs elsewhere (the same proof on the other provider, upstream's specs against each wrong build) and the comparison across minor versions (builds v1.36 too)
	$(GO) vet ./...
	@GANGBENCH_TEST_LONG=1 $(MAKE) --no-print-directory timed-tests

.PHONY: timed-tests
timed-tests:
	@rm -rf $(TEST_OUT) && mkdir -p $(TEST_OUT)
	@$(GO) build -o $(TEST_OUT)/testtimes ./tools/testtimes
	@set -o pipefail; rc=0; \
	$(GO) test -json -p 1 -parallel $(TEST_PARALLEL) -count=1 -timeout $(TEST_TIMEOUT) $(TEST_PKGS) | $(TEST_OUT)/testtimes stream -o $(TEST_OUT)/events.json -step test || rc=$$?; \
	if [ $$rc = 0 ]; then $(MAKE) --no-print-directory fuzz FUZZ_EVENTS=$(abspath $(TEST_OUT))/events.json || rc=$$?; fi; \
	$(TEST_OUT)/testtimes table $(TEST_OUT)/events.json; \
	exit $$rc

# Every decoder of user input is fuzzed for a short fixed time in `make test` (Go fuzzes one target
# per command). Seed corpora live in each package's testdata/fuzz.
# Budgets are execution counts, not durations: with a duration, go1.26's fuzz coordinator can report
# a bare "context deadline exceeded" failure when the deadline fires while a worker is mid-input on a
# loaded machine (go.dev/issue/75804, fixed in Go 1.27; seen in make test here). 30000 executions
# take about 2–10 s per target on 2 cores.
FUZZTIME ?= 30000x
FUZZ_TARGETS := FuzzDecodeScenario:./perf/scenario/ FuzzDecodeSLO:./perf/slo/ FuzzParseSLOExpr:./perf/slo/ \
	FuzzStrictYAML:./perf/internal/strictyaml/ FuzzReadRun:./results/ FuzzReadTimeline:./observe/monitor/
# FUZZ_EVENTS (set by make test): record each target's events there, through tools/testtimes.
FUZZ_EVENTS ?=

.PHONY: fuzz
fuzz: ## Fuzz every decoder for FUZZTIME each (default 30000x executions; a duration such as 10s works too)
	@set -eo pipefail; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t%%:*} ($(FUZZTIME))"; \
		if [ -n "$(FUZZ_EVENTS)" ]; then \
			$(GO) test -json -run '^$$' -fuzz "^$${t%%:*}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 500x $${t#*:} | $(abspath $(TEST_OUT))/testtimes stream -o $(FUZZ_EVENTS) -step "fuzz $${t%%:*}"; \
		else \
			$(GO) test -run '^$$' -fuzz "^$${t%%:*}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 500x $${t#*:}; \
		fi; \
	done

.PHONY: test-short
test-short: ## Fast hermetic tests only (no cluster)
	$(GO) test -short ./...

.PHONY: bench-cluster
bench-cluster: k8s-build ## Benchmark cluster create → nodes Ready → delete with 4 and 500 nodes
	$(GO) test -run '^$$' -bench BenchmarkCreate -benchtime 3x -timeout 30m ./clusters/local/

.PHONY: bench-kind
bench-kind: build ## Benchmark kind cluster create → Ready with GPUs → delete, 1 and 3 workers, warm node image
	$(GO) test -run '^$$' -bench BenchmarkCreate -benchtime 3x -timeout 40m ./clusters/kind/

# The kind node image is built on this machine: its root filesystem with debootstrap (as root), runc
# with cgo against libseccomp (found with pkg-config, compiled with $$CC or gcc) and the pause program
# linked statically (libc6-dev). clusters/kind/prereq.go checks the same list for `gangbench doctor`,
# --provider auto and the build itself. Where a container engine answers, what is missing is
# installed with apt-get as root; elsewhere this stops, before any build, with the command to run.
# Without an engine nothing is needed (kind cannot run; the kind tests skip).
.PHONY: node-image-deps
node-image-deps: ## Install the kind node image build's packages when an engine answers and they are missing
	@if docker info >/dev/null 2>&1 || podman info >/dev/null 2>&1 || nerdctl info >/dev/null 2>&1; then \
		missing=; cc=$${CC:-gcc}; \
		command -v debootstrap >/dev/null || missing="$$missing debootstrap"; \
		command -v pkg-config >/dev/null || missing="$$missing pkg-config"; \
		pkg-config --exists libseccomp 2>/dev/null || missing="$$missing libseccomp-dev"; \
		if ! command -v $$cc >/dev/null; then missing="$$missing gcc libc6-dev"; \
		else case "$$($$cc -print-file-name=libc.a)" in /*) ;; *) missing="$$missing libc6-dev";; esac; fi; \
		if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "installing$$missing (the kind node image build needs them)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends$$missing >/dev/null; \
		elif [ -n "$$missing" ]; then \
			echo "error: the kind node image build needs$$missing; installing them needs root and apt-get. Run:" >&2; \
			if command -v apt-get >/dev/null; then echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends$$missing" >&2; \
			else echo "  install$$missing (Debian's names) with this system's package manager" >&2; fi; \
			echo "then run make $(MAKECMDGOALS) again$(if $(filter e2e perf compare lab cluster,$(MAKECMDGOALS)),$(comma) or without kind: make $(MAKECMDGOALS) PROVIDER=local)" >&2; \
			exit 1; \
		elif [ "$$(id -u)" != 0 ]; then \
			echo "note: not root: debootstrap cannot build the kind node image here; --provider auto uses local unless the image is cached (gangbench doctor)"; \
		fi; \
	fi

comma := ,

# What the user targets need before any build: the kind node image's packages when kind would be
# used (an engine answers and PROVIDER is not local). The local provider needs nothing but Go.
.PHONY: deps
deps: $(if $(filter local,$(PROVIDER)),,node-image-deps) ## Install what PROVIDER (default: kind where an engine answers) needs here, or say how
	@:

# make test builds (or reuses) the node image before the tests when an engine answers, so a cold
# build is its own step with its own progress and time, not hidden in the first kind test.
.PHONY: test-node-image
test-node-image: build node-image-deps
	@if docker info >/dev/null 2>&1 || podman info >/dev/null 2>&1 || nerdctl info >/dev/null 2>&1; then \
		$(BIN) kind node-image --k8s-version $(K8S_VERSION); \
	else echo "no container engine answers: no kind node image (the kind tests skip)"; fi

.PHONY: node-image
node-image: build node-image-deps ## Build (or reuse) the kind node image for K8S_VERSION offline (PRUNE=1 removes them all)
	$(BIN) kind node-image $(if $(PRUNE),--prune,--k8s-version $(K8S_VERSION))

.PHONY: docs
docs: ## Regenerate docs/assertions.md from the suites' code
	$(GO) run ./cmd/gangbench e2e list --markdown > docs/assertions.md

.PHONY: clean
clean: ## Remove build outputs and run results (not the binary cache)
	rm -rf _output

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target> [VAR=value]\n"} /^[a-zA-Z0-9_-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
