# fedfailover Makefile. Every target builds what it needs into bin/ (git-ignored).
# Tools come from the Go modules under hack/tools/; a tool is rebuilt only when
# its tools module (go.mod/go.sum, i.e. a pinned version) changes.
#
# Note: plain `go mod tidy` fails on a test-only import inside sigs.k8s.io/kubefed;
# use `make tidy` (go mod tidy -e) instead.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)
export KUBEBUILDER_ASSETS := $(BIN)

K8S_VERSION := v1.37.2
K8S_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37

# What every binary and the image say about their build (internal/version:
# --version, fedfailover_build_info, the image labels). VERSION defaults to
# the chart's appVersion; REVISION is the git commit, "-dirty" when the tree
# has uncommitted changes.
APP_VERSION := $(shell awk -F'"' '/^appVersion:/ {print $$2}' charts/fedfailover/Chart.yaml)
VERSION ?= v$(APP_VERSION)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
VERSION_PKG := github.com/fedfailover/fedfailover/internal/version
VERSION_LDFLAGS := -X $(VERSION_PKG).version=$(VERSION) -X $(VERSION_PKG).revision=$(REVISION)

step = @printf '\033[1m==> %s\033[0m\n' "$(1)"

##@ General
.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Tools
K8S_TOOLS := kube-apiserver kube-controller-manager kube-scheduler kubectl
LAB_TOOLS := $(addprefix $(BIN)/,$(K8S_TOOLS) etcd kwok kubefed-controller-manager kubefedctl)
DEV_TOOLS := $(BIN)/controller-gen $(BIN)/golangci-lint $(BIN)/helm
# promtool tests the alerting rules; krew and its validate-krew-manifest
# check the plugin release.
OPS_TOOLS := $(BIN)/promtool $(BIN)/krew $(BIN)/validate-krew-manifest

.PHONY: tools
tools: $(LAB_TOOLS) $(DEV_TOOLS) $(OPS_TOOLS) ## Build every tool into bin/ (cached; rebuilt when a pinned version changes).

$(addprefix $(BIN)/,$(K8S_TOOLS)): hack/tools/kubernetes/go.mod hack/tools/kubernetes/go.sum
	$(call step,building $(@F) (k8s.io/kubernetes $(K8S_VERSION)))
	@cd hack/tools/kubernetes && go build -ldflags "$(K8S_LDFLAGS)" -o $@ k8s.io/kubernetes/cmd/$(@F)

$(BIN)/etcd: hack/tools/etcd/go.mod hack/tools/etcd/go.sum
	$(call step,building etcd)
	@cd hack/tools/etcd && go build -o $@ go.etcd.io/etcd/server/v3

$(BIN)/kwok: hack/tools/kwok/go.mod hack/tools/kwok/go.sum
	$(call step,building kwok)
	@cd hack/tools/kwok && go build -o $@ sigs.k8s.io/kwok/cmd/kwok

$(BIN)/kubefed-controller-manager: hack/tools/kubefed/go.mod hack/tools/kubefed/go.sum
	$(call step,building kubefed controller-manager)
	@cd hack/tools/kubefed && go build -o $@ sigs.k8s.io/kubefed/cmd/controller-manager

$(BIN)/kubefedctl: hack/tools/kubefed/go.mod hack/tools/kubefed/go.sum
	$(call step,building kubefedctl)
	@cd hack/tools/kubefed && go build -o $@ sigs.k8s.io/kubefed/cmd/kubefedctl

$(BIN)/controller-gen: hack/tools/devtools/go.mod hack/tools/devtools/go.sum
	$(call step,building controller-gen)
	@cd hack/tools/devtools && go build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(BIN)/golangci-lint: hack/tools/lint/go.mod hack/tools/lint/go.sum
	$(call step,building golangci-lint)
	@cd hack/tools/lint && go build -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

$(BIN)/helm: hack/tools/helm/go.mod hack/tools/helm/go.sum
	$(call step,building helm)
	@cd hack/tools/helm && go build -o $@ helm.sh/helm/v3/cmd/helm

# remove_all_sd leaves out Prometheus' service discovery plugins (cloud SDKs):
# half the build, and rule checks and tests do not use them.
$(BIN)/promtool: hack/tools/promtool/go.mod hack/tools/promtool/go.sum
	$(call step,building promtool)
	@cd hack/tools/promtool && go build -tags remove_all_sd -o $@ github.com/prometheus/prometheus/cmd/promtool

$(BIN)/krew $(BIN)/validate-krew-manifest: hack/tools/krew/go.mod hack/tools/krew/go.sum
	$(call step,building $(@F) (sigs.k8s.io/krew v0.4.3))
	@cd hack/tools/krew && go build -o $@ sigs.k8s.io/krew/cmd/$(@F)

##@ Development
.PHONY: generate
generate: $(BIN)/controller-gen ## Generate deepcopy code for the API.
	$(call step,generating deepcopy)
	@controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: $(BIN)/controller-gen ## Generate the CRD and RBAC manifests.
	$(call step,generating CRDs and RBAC)
	@controller-gen crd rbac:roleName=fedfailover-manager paths=./api/... paths=./controllers/... paths=./cmd/manager/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	@hack/sync-chart.sh

.PHONY: tidy
tidy: ## go mod tidy -e (plain tidy fails on a kubefed test-only import).
	@go mod tidy -e

.PHONY: fmt
fmt: ## gofmt the code.
	@gofmt -l -w $$(git ls-files '*.go' | grep -v '^hack/tools/')

.PHONY: vet
vet: ## go vet.
	$(call step,go vet)
	@go vet ./...

.PHONY: lint
lint: $(BIN)/golangci-lint ## Run golangci-lint.
	$(call step,golangci-lint)
	@golangci-lint run ./...

.PHONY: build
build: ## Build the manager, the CLI (with its completion helper) and the lab into bin/, stamped with VERSION and REVISION.
	$(call step,building fedfailover binaries $(VERSION))
	@go build -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/ ./cmd/...
	@cp cmd/kubectl-failover/kubectl_complete-failover $(BIN)/

##@ Release
RELEASE_DIR ?= _output/release
IMAGE_DIR ?= _output/image
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_SOURCE ?= https://github.com/fedfailover/fedfailover
# The chart's version and appVersion: VERSION without its "v".
CHART_VERSION := $(VERSION:v%=%)
# Where the release's files are downloaded from (the krew manifest's and
# the SBOMs' URLs): RELEASE_URL, else the GitHub release of VERSION.
RELEASE_DOWNLOAD = $(or $(RELEASE_URL),https://github.com/fedfailover/fedfailover/releases/download/$(VERSION))
RELEASE_IMAGE_TAR = fedfailover-image_$(VERSION).oci.tar
RELEASE_ENV = VERSION="$(VERSION)" REVISION="$(REVISION)" PLATFORMS="$(PLATFORMS)" IMAGE_DIR="$(IMAGE_DIR)" IMAGE_PLATFORMS="$(IMAGE_PLATFORMS)"

# No container daemon: hack/tools/image (go-containerregistry) builds a
# static manager per platform and writes the image index as an OCI layout.
# SOURCE_DATE_EPOCH sets the image's timestamps (default: the Unix epoch).
IMAGE_BUILD = cd hack/tools/image && go run . --repo "$(CURDIR)" --out "$(abspath $(IMAGE_DIR))" --platforms "$(IMAGE_PLATFORMS)" \
	--version "$(VERSION)" --revision "$(REVISION)" --source "$(IMAGE_SOURCE)" --ldflags "$(VERSION_LDFLAGS)"

.PHONY: image
image: ## The manager image (OCI index linux/amd64 + linux/arm64, static binary, user 65532) as an OCI layout in _output/image/, no container daemon needed (VERSION, REVISION, IMAGE_PLATFORMS override); push it with crane or skopeo.
	$(call step,building the manager image $(VERSION) into $(IMAGE_DIR))
	@$(IMAGE_BUILD)

# Everything of a release in RELEASE_DIR (docs/release.md): the plugin
# archives and krew manifest (hack/release.sh, checked with krew), the image
# as a tar of its OCI layout (also left in IMAGE_DIR), the Helm chart
# package, an SPDX SBOM of the image and of each archive (hack/tools/sbom),
# the release notes, MANIFEST and SHA256SUMS; then the folder is checked to
# hold exactly that (hack/release-folder.sh).
.PHONY: release
release: $(BIN)/krew $(BIN)/validate-krew-manifest $(BIN)/helm ## The release in _output/release/: plugin archives + krew manifest, manager image (OCI layout tar), Helm chart, SPDX SBOMs, release notes, MANIFEST, SHA256SUMS; checked (VERSION, PLATFORMS, RELEASE_URL override).
	$(call step,emptying $(RELEASE_DIR) for release $(VERSION))
	@hack/release-folder.sh clean $(RELEASE_DIR)
	$(call step,building the kubectl plugin archives and the krew manifest)
	@VERSION="$(VERSION)" REVISION="$(REVISION)" PLATFORMS="$(PLATFORMS)" RELEASE_URL="$(RELEASE_URL)" hack/release.sh $(RELEASE_DIR)
	$(call step,checking the plugin release with krew)
	@hack/verify-krew.sh $(RELEASE_DIR)
	$(call step,building the manager image $(VERSION) into $(IMAGE_DIR) and packing it as $(RELEASE_IMAGE_TAR))
	@$(IMAGE_BUILD)
	@tar -C $(IMAGE_DIR) --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf $(RELEASE_DIR)/$(RELEASE_IMAGE_TAR) oci-layout index.json blobs
	$(call step,packaging the Helm chart $(CHART_VERSION))
	@helm package charts/fedfailover --version "$(CHART_VERSION)" --app-version "$(CHART_VERSION)" --destination $(RELEASE_DIR) >/dev/null
	$(call step,writing the SBOMs (SPDX 2.3) of the image and each plugin archive)
	@cd hack/tools/sbom && go run . --out "$(abspath $(RELEASE_DIR))" --version "$(VERSION)" --download-url "$(RELEASE_DOWNLOAD)" \
		"$(abspath $(RELEASE_DIR))/$(RELEASE_IMAGE_TAR)" "$(abspath $(RELEASE_DIR))"/kubectl-failover_*.tar.gz
	$(call step,extracting the release notes of $(VERSION) from CHANGELOG.md)
	@$(RELEASE_ENV) hack/release-folder.sh notes $(RELEASE_DIR)
	$(call step,writing MANIFEST and SHA256SUMS)
	@$(RELEASE_ENV) hack/release-folder.sh index $(RELEASE_DIR)
	$(call step,checking $(RELEASE_DIR) holds every file of the release)
	@$(RELEASE_ENV) hack/release-folder.sh verify $(RELEASE_DIR)

# Helm installs crds/ on the first install only and never upgrades them:
# apply them before `helm upgrade` (docs/release.md#upgrading). Server-side,
# taking the fields over from Helm's first install.
.PHONY: install-crds
install-crds: $(BIN)/kubectl ## Apply the chart's CRDs (charts/fedfailover/crds/) server-side to the current kubectl context: run it before every helm upgrade.
	$(call step,applying charts/fedfailover/crds/ server-side to $$(kubectl config current-context))
	@kubectl apply --server-side --force-conflicts --field-manager fedfailover-crds -f charts/fedfailover/crds/

##@ Test
GO_TEST_FLAGS ?= -count=1

.PHONY: verify
verify: generate manifests ## Fail when generated files or formatting are stale.
	$(call step,checking generated files are up to date)
	@git diff --exit-code -- api config || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api config | grep '^??')" || { echo "untracked generated files: commit them"; git status --porcelain -- api config; exit 1; }
	$(call step,checking gofmt)
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^hack/tools/')); test -z "$$out" || { echo "gofmt needed: $$out"; exit 1; }

# Besides envtest's binaries: promtool (alert rule tests), kubectl (plugin
# completion, kustomize), helm (chart rendering tests) and krew (the plugin
# release test).
.PHONY: test-unit
test-unit: $(BIN)/kube-apiserver $(BIN)/etcd $(BIN)/kubectl $(BIN)/helm $(OPS_TOOLS) ## Unit, fuzz-seed and envtest API tests (with promtool and krew), and the image builder's and SBOM generator's tests.
	$(call step,unit and envtest tests)
	@go test $(GO_TEST_FLAGS) ./...
	$(call step,manager image (hack/tools/image: builds both platforms, runs the amd64 manager))
	@cd hack/tools/image && go test $(GO_TEST_FLAGS) -timeout 30m ./...
	$(call step,release SBOMs (hack/tools/sbom: SPDX of the real plugin, in an archive and an image layout))
	@cd hack/tools/sbom && go test $(GO_TEST_FLAGS) -timeout 10m ./...

# Packages whose tests need the local federation (build tag e2e). They run one
# package at a time: two federations on two cores would make timings noisy.
E2E_PKGS := ./test/e2e/... ./test/members/lab/... ./test/sharding/... ./test/managementlab/...
# E2E_RUN narrows the run, e.g. `make test-e2e E2E_RUN=TestRebalance`.
E2E_RUN ?= .

.PHONY: test-e2e
test-e2e: $(LAB_TOOLS) ## End-to-end tests on the local federation (E2E_RUN=regexp narrows them).
	$(call step,end-to-end tests on the local federation)
	@go test $(GO_TEST_FLAGS) -p 1 -tags e2e -timeout 45m -run '$(E2E_RUN)' $(E2E_PKGS)

# The optional monitoring objects: ServiceMonitor, PrometheusRule (alerts),
# Grafana dashboard ConfigMap.
CHART_MONITORING := --set metrics.serviceMonitor.enabled=true --set metrics.prometheusRule.enabled=true \
	--set metrics.grafanaDashboard.enabled=true
# Every other installation option: Machine deletion, the metrics certificate
# from cert-manager, http:// members, the NetworkPolicy.
CHART_OPTIONS := --set nodeRecovery.machineDeletion.enabled=true --set metrics.tls.certManager.enabled=true \
	--set members.allowInsecureEndpoints=true --set networkPolicy.enabled=true \
	--set 'networkPolicy.apiServer.cidrs={10.96.0.1/32}' --set 'networkPolicy.members.cidrs={0.0.0.0/0}'

.PHONY: chart-check
chart-check: $(BIN)/helm $(BIN)/kubectl ## Lint and render the Helm chart (also with its monitoring objects and options) and config/default; test what each option renders; fail when the chart drifts from its sources.
	$(call step,checking the chart is in sync with config/ and docs/)
	@hack/sync-chart.sh --check
	$(call step,helm lint)
	@helm lint --strict --kube-version $(K8S_VERSION) charts/fedfailover
	@helm lint --strict --kube-version $(K8S_VERSION) charts/fedfailover $(CHART_MONITORING)
	@helm lint --strict --kube-version $(K8S_VERSION) charts/fedfailover $(CHART_MONITORING) $(CHART_OPTIONS)
	$(call step,helm template)
	@helm template fedfailover charts/fedfailover --namespace fedfailover-system --kube-version $(K8S_VERSION) --include-crds >/dev/null
	@out=$$(helm template fedfailover charts/fedfailover --namespace fedfailover-system --kube-version $(K8S_VERSION) $(CHART_MONITORING)); \
	for kind in ServiceMonitor PrometheusRule; do grep -q "^kind: $$kind$$" <<<"$$out" || { echo "helm template renders no $$kind"; exit 1; }; done; \
	grep -q '^  fedfailover.json: |-$$' <<<"$$out" || { echo "helm template renders no dashboard ConfigMap"; exit 1; }
	@test -z "$$(helm template fedfailover charts/fedfailover --namespace fedfailover-system --kube-version $(K8S_VERSION) | grep -E '^kind: (ServiceMonitor|PrometheusRule)$$|fedfailover.json')" \
		|| { echo "the monitoring objects must be off by default"; exit 1; }
	$(call step,kubectl kustomize config/default)
	@kubectl kustomize config/default >/dev/null
	$(call step,chart and kustomize options (test/chart))
	@go test $(GO_TEST_FLAGS) ./test/chart/

# The short fault campaign: fixed seeds, so every submission replays the
# same schedules; 1021 has two partitions whose remediation powers the node
# off, recovered fenced, next to a kill of the manager and a cut
# (docs/chaos.md).
CHAOS_SHORT := --runs 3 --seed 1020

.PHONY: test-chaos
test-chaos: $(LAB_TOOLS) ## The short fault campaign (3 runs, fixed seeds) on the local federation.
	$(call step,building fedfailover-chaos)
	@go build -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/fedfailover-chaos ./cmd/fedfailover-chaos
	$(call step,short fault campaign ($(CHAOS_SHORT)))
	@$(BIN)/fedfailover-chaos $(CHAOS_SHORT)

.PHONY: test
test: tools verify vet chart-check test-unit test-e2e test-chaos ## Everything CI runs (except lint).

##@ Benchmarks (print a table; BENCH_JSON=FILE also writes JSON)
.PHONY: bench-members
bench-members: $(LAB_TOOLS) ## Member cache memory and sync time at 1,000 and 2,000 kwok nodes.
	$(call step,building fedfailover-bench)
	@go build -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/fedfailover-bench ./cmd/fedfailover-bench
	$(call step,members benchmark)
	@$(BIN)/fedfailover-bench members $(BENCH_ARGS)

.PHONY: bench-rebalance
bench-rebalance: $(LAB_TOOLS) ## Seconds to all replicas Running after capacity exhaustion and member failure, vs kubefed alone.
	$(call step,building fedfailover-bench)
	@go build -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/fedfailover-bench ./cmd/fedfailover-bench
	$(call step,rebalance benchmark)
	@$(BIN)/fedfailover-bench rebalance $(BENCH_ARGS)

.PHONY: bench-recovery
bench-recovery: $(LAB_TOOLS) ## Node recovery, Evidence and NotReady detection side by side: evidence and power-off to taint and to replacement Running (median, p95), vs no operator.
	$(call step,building fedfailover-bench)
	@go build -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/fedfailover-bench ./cmd/fedfailover-bench
	$(call step,node recovery benchmark)
	@$(BIN)/fedfailover-bench recovery $(BENCH_ARGS)

# Sizes run by bench-scale: goal (3 x 2,000 x 10, 500 RSPs) and members (20 x 100 x 10);
# SCALE_SIZES=sharded runs 10 x 5,000 x 10 with three sharded manager replicas.
SCALE_SIZES ?= goal members

.PHONY: bench-scale
bench-scale: $(LAB_TOOLS) ## The manager process at federation scale on the static-bulk rig with churn: sync, RSS/heap, CPU, API requests, decision latency, the rig's own cost; INVALID without headroom (SCALE_SIZES).
	$(call step,building fedfailover-bench)
	@go build -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/fedfailover-bench ./cmd/fedfailover-bench
	@for size in $(SCALE_SIZES); do \
		echo "==> scale benchmark, size $$size"; \
		BENCH_JSON=$${BENCH_JSON:+$${BENCH_JSON%.json}-$$size.json} $(BIN)/fedfailover-bench scale --size $$size $(BENCH_ARGS) || exit 1; \
	done

##@ Fault campaign
RUNS ?= 50
SEED ?= 1000
CHAOS_ARGS ?=

.PHONY: chaos
chaos: $(LAB_TOOLS) ## Fault campaign: RUNS random runs from SEED (CHAOS_ARGS adds flags, BENCH_JSON=FILE writes JSON).
	$(call step,building fedfailover-chaos)
	@go build -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/fedfailover-chaos ./cmd/fedfailover-chaos
	$(call step,fault campaign: $(RUNS) runs from seed $(SEED))
	@$(BIN)/fedfailover-chaos --runs $(RUNS) --seed $(SEED) --keep-going $(CHAOS_ARGS)

##@ Demo
.PHONY: demo
demo: $(LAB_TOOLS) build ## Play the story on the local federation: node loss, capacity loss, failback (KEEP=1 leaves it running).
	$(call step,running the demo on the local federation)
	@$(BIN)/fedfailover-demo
