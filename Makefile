# Near-real-time lakehouse. `make demo` and `make test` install what they need.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.8
STAMP := $(VENV)/.installed
LAKEHOUSE := $(BIN)/lakehouse
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help install debs artifacts checkov demo lint test-unit test down-local status-local clean bench bench-ingest bench-system bench-headroom bench-load bench-cdc bench-cdc-scale soak-cdc bench-peers bench-cdc-peers soak-pair chaos test-chaos trino-local \
        up down status trino load faults faults-node up-node down-node test-node node-debs image-lock k8s-generate k8s-validate k8s-crds

help: ## List the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

install: debs $(STAMP) artifacts checkov ## Venv, pinned Python deps, pinned jars/binaries, missing Debian packages (idempotent)

debs:
	@bash deploy/install_debs.sh

$(STAMP): requirements.lock pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "error: $(PYTHON) is Python $$($(PYTHON) -c 'import platform; print(platform.python_version())' 2>/dev/null || echo '(not found)'); the project needs 3.11 or newer (Spark 4.1 needs 3.10+)." >&2; \
	  echo "       Install one (Debian 12: apt-get install python3) and run: make install PYTHON=/path/to/python3.11" >&2; exit 1; }
	@echo "  python venv $(VENV) (locked deps, hashes checked)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip >/dev/null
	@$(BIN)/python -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	@$(BIN)/uv pip install -q --python $(BIN)/python --require-hashes -r requirements.lock
	@$(BIN)/uv pip install -q --python $(BIN)/python --no-deps -e .
	@# uv builds pyspark's sdist into a new cache revision on every fresh install (1.4 GB each): drop the
	@# revisions nothing refers to, or a machine that installs often fills its disk (the object store then 500s).
	@$(BIN)/uv cache prune -q 2>/dev/null || true
	@# Bytecode ahead of time: where PYTHONDONTWRITEBYTECODE is set, every process (the CLI, each
	@# Spark Python worker) would otherwise compile pandas, pyarrow and pyspark from source (~2 s).
	@# A few packages ship test fixtures that are not valid Python 3: compileall reports them, harmlessly.
	@echo "  compiling the venv's bytecode (once)"
	@$(BIN)/python -m compileall -q -j 0 $(VENV)/lib >/dev/null 2>&1 || true
	@touch $(STAMP)

artifacts: $(STAMP)
	@$(BIN)/python -m deploy.artifacts

CHECKOV := .tools/checkov/.installed
checkov: $(CHECKOV)
$(CHECKOV): deploy/k8s/checkov.lock
	@echo "  checkov in its own venv .tools/checkov (hashes checked)"
	@test -x .tools/checkov/bin/python || $(PYTHON) -m venv .tools/checkov
	@$(BIN)/uv pip install -q --python .tools/checkov/bin/python --require-hashes -r deploy/k8s/checkov.lock 2>/dev/null \
	  || uv pip install -q --python .tools/checkov/bin/python --require-hashes -r deploy/k8s/checkov.lock
	@touch $@

demo: install ## The whole story on the local stack (KEEP=1 leaves the stack up afterwards)
	@$(LAKEHOUSE) demo $(if $(KEEP),--keep-running,)

lint: install ## ruff over the tree, mypy over the base settings and pipeline/, every path the docs quote exists
	@$(BIN)/ruff check .
	@$(BIN)/mypy
	@$(BIN)/python -m lab.docs_check

test-unit: install ## The tests that need no services (no stack, no Spark): about a minute
	@$(BIN)/pytest -m "not stack and not slow and not chaos" $(PYTEST_ARGS)

test: install lint ## Lint, then the test suite, chaos CI subset included (starts its own stacks on shifted ports)
	@$(BIN)/pytest $(PYTEST_ARGS)

test-chaos: install ## Only the chaos suite's CI subset (~18 min; its own stack on ports +200)
	@$(BIN)/pytest -m chaos $(PYTEST_ARGS)

trino-local: install ## The Trino CLI (476) on the local stack's Trino, catalog iceberg (Trino starts on first use)
	@$(LAKEHOUSE) stack up
	@$(LAKEHOUSE) trino

status-local: ## Status of the local stack
	@$(LAKEHOUSE) stack status

down-local: ## Stop the local stack (data kept; PURGE=1 deletes it)
	@test ! -x $(LAKEHOUSE) || $(LAKEHOUSE) stack down $(if $(PURGE),--purge,)

clean: down-local ## Remove venv, tools and run dirs
	rm -rf $(VENV) .tools .run .run-test results

bench: install ## The standard benchmarks (~15 min: ingest, CDC, headroom, whole system): figures vs goals, appended to docs/benchmarks.md; the README headline regenerated
	@$(LAKEHOUSE) stack up
	@$(LAKEHOUSE) bench standard

bench-ingest: install ## Ingest benchmark on the local stack (RATE=events/s DURATION=seconds)
	@$(LAKEHOUSE) stack up
	@$(LAKEHOUSE) bench ingest --rate $(or $(RATE),10000) --duration $(or $(DURATION),600)

bench-system: install ## Everything running at the demo's load: freshness per table + exactly-once (DURATION=seconds)
	@$(LAKEHOUSE) stack up
	@$(LAKEHOUSE) bench system --duration $(or $(DURATION),600)

bench-headroom: install ## Highest click rate with freshness p95 <= 10 s, vs the raw ceiling
	@$(LAKEHOUSE) stack up
	@$(LAKEHOUSE) bench headroom

bench-load: install ## Load generator capacity: one Locust process vs workers
	@$(LAKEHOUSE) stack up
	@$(LAKEHOUSE) bench load

soak: install ## Soak with maintenance on (DURATION=1h RATE=events/s EVERY=3m); goals checked, plot written
	@$(LAKEHOUSE) stack up
	@$(LAKEHOUSE) bench soak --rate $(or $(RATE),2000) --duration $(or $(DURATION),1h) --every $(or $(EVERY),3m)

soak-pair: install ## The soak, then the same load without maintenance: freshness p95 unchanged by maintenance? (twice DURATION)
	@$(LAKEHOUSE) stack up
	@$(LAKEHOUSE) bench soak --pair --rate $(or $(RATE),2000) --duration $(or $(DURATION),40m) --every $(or $(EVERY),3m)

chaos: install ## Fault injection under load on a stack of its own (FAULTS=all|ci|kill:pipeline,...); table printed
	@$(LAKEHOUSE) chaos --faults $(or $(FAULTS),all)

bench-cdc: install ## CDC benchmark: changes/s and apply freshness (CDC_RATE=changes/s CDC_DURATION=seconds)
	@$(LAKEHOUSE) stack up
	@$(LAKEHOUSE) bench cdc --rate $(or $(CDC_RATE),1000) --duration $(or $(CDC_DURATION),60)

# two executor processes of 640 MiB, as the cluster's pipeline SparkApplication runs them (a variable: make's
# $(or) would split the master URL at its commas)
CDC_SCALE_MASTER = local-cluster[2,1,640]
bench-cdc-scale: install ## CDC into a member table of MEMBERS rows (10 M) on two executors: snapshot, changes, memory, readers; rows to docs/benchmarks.md (~13 min)
	@$(LAKEHOUSE) stack up
	@SPARK_MASTER='$(or $(SPARK_MASTER),$(CDC_SCALE_MASTER))' $(LAKEHOUSE) bench cdc --members $(or $(MEMBERS),10000000) --rate $(or $(CDC_RATE),1000) --duration $(or $(CDC_DURATION),300) --record

soak-cdc: install ## bench-cdc-scale for an hour: delete files bounded, point query and count at the start and the end
	@$(LAKEHOUSE) stack up
	@$(LAKEHOUSE) bench cdc --members $(or $(MEMBERS),10000000) --rate $(or $(CDC_RATE),1000) --duration $(or $(CDC_DURATION),3600)

# a variable, not a default inside $(or): make splits $(or)'s arguments at commas
PEERS_RATES = 2000,10000,50000
bench-peers: install ## This pipeline beside Spark Structured Streaming and the seed's Flink job, same workload (RATES=2000,10000,50000 DURATION=300; long)
	@$(LAKEHOUSE) stack up
	@$(LAKEHOUSE) bench peers --rates '$(or $(RATES),$(PEERS_RATES))' --duration $(or $(DURATION),300)

# the sizes `bench-cdc-peers` runs each system at (a variable: make's $(or) splits at commas)
CDC_PEERS_MEMBERS = 1000000,10000000
bench-cdc-peers: install ## The CDC apply beside Spark MERGE INTO and seed 004's Flink upsert sink, same change stream (MEMBERS=1000000,10000000 DURATION=300; ~80 min); rows to docs/benchmarks.md
	@$(LAKEHOUSE) stack up
	@SPARK_MASTER='$(or $(SPARK_MASTER),$(CDC_SCALE_MASTER))' $(LAKEHOUSE) bench cdc-peers --members '$(or $(MEMBERS),$(CDC_PEERS_MEMBERS))' --rate $(or $(CDC_RATE),1000) --duration $(or $(DURATION),300) --record

# ---------------------------------------------------------------- Kubernetes (kind)
KIND_CLUSTER := lakehouse
NS := lakehouse
IMAGE_NAME := lakehouse
STRIMZI_VERSION := 1.2.0
SPARK_OPERATOR_VERSION := 2.5.2
KUBECTL := kubectl --context kind-$(KIND_CLUSTER)

image-lock: $(STAMP) ## Regenerate deploy/image-requirements.lock: requirements.lock's pins without the test and lab extras
	@mkdir -p .run && grep -E '^[A-Za-z0-9_.-]+==' requirements.lock | sed 's/ \\$$//' > .run/lock-constraints.txt
	@{ echo "# The image's Python dependencies: requirements.lock without the test and lab extras (the same pins and hashes)."; \
	   echo "# Regenerate after requirements.lock changes: \`make image-lock\` (tests/deploy/test_image_contents.py checks both agree)."; \
	   $(BIN)/uv pip compile -q pyproject.toml -c .run/lock-constraints.txt --python-version 3.11 --generate-hashes --no-header \
	     | sed 's#-c .run/lock-constraints.txt#-c requirements.lock#'; } > deploy/image-requirements.lock

k8s-generate: $(STAMP) ## Regenerate k8s/base/generated from settings (topics, scrape config, rules, dashboards, catalog)
	@$(BIN)/python -m deploy.k8s.generate

k8s-validate: install ## Validate the manifests offline: render, strict schemas, CRDs, cross-references, checkov
	@$(BIN)/python -m deploy.k8s.validate

k8s-crds: ## Download the pinned CRDs (Strimzi, spark-operator, prometheus-operator) into .tools/k8s-crds
	@bash deploy/k8s/fetch_crds.sh .tools/k8s-crds $(STRIMZI_VERSION) $(SPARK_OPERATOR_VERSION)

up: $(STAMP) ## kind cluster + operators + image + the lakehouse, in order; prints how to reach the UIs
	@bash deploy/k8s/up.sh $(KIND_CLUSTER) $(NS) $(IMAGE_NAME) $(STRIMZI_VERSION) $(SPARK_OPERATOR_VERSION)

down: ## Delete the kind cluster (and everything in it)
	@command -v kind >/dev/null || { echo "error: kind not found (https://kind.sigs.k8s.io)"; exit 1; }
	@kind delete cluster --name $(KIND_CLUSTER)

NODE_DEBS := containerd runc containernetworking-plugins iptables conntrack docker.io debootstrap curl
node-debs:
	@bash deploy/install_debs.sh $(NODE_DEBS)

up-node: install node-debs ## make up on a one-node Kubernetes cluster of this machine, in namespaces of its own (root; the first run builds it)
	@TARGET=node bash deploy/k8s/up.sh node $(NS) $(IMAGE_NAME) $(STRIMZI_VERSION) $(SPARK_OPERATOR_VERSION)

down-node: ## Stop every process of the one-node cluster and remove its namespaces (data kept)
	@$(BIN)/python -m deploy.node down

test-node: install node-debs ## The one-node cluster's own tests (root): a restricted pod, DNS, Services, the host's network untouched
	@$(BIN)/pytest -m node tests/deploy/node $(PYTEST_ARGS)

status: ## Pods, Spark applications and Kafka topics in the cluster
	@$(KUBECTL) -n $(NS) get pods,sparkapplications,scheduledsparkapplications,kafkatopics

trino: ## A Trino CLI session on the cluster's coordinator (catalog and schema preset)
	@$(KUBECTL) -n $(NS) exec -it deploy/trino-coordinator -- trino --catalog iceberg --schema ods_behavior

faults: ## Under a bounded load, kill the pipeline's executor and driver pods; Trino must count exactly (RATE DURATION)
	@$(BIN)/python -m deploy.k8s.faults --context kind-$(KIND_CLUSTER) --namespace $(NS) --rate $(or $(RATE),200) --duration $(or $(DURATION),120s)

faults-node: ## make faults on the one-node cluster (after make up-node)
	@$(BIN)/python -m deploy.node exec -- $(BIN)/python -m deploy.k8s.faults --context $$($(BIN)/python -m deploy.node name) --namespace $(NS) --rate $(or $(RATE),200) --duration $(or $(DURATION),120s)

load: ## Bounded load through the cluster's Locust master (RATE=events/s DURATION=60s)
	@$(KUBECTL) -n $(NS) exec deploy/locust-master -- python -m loadgen.swarm --rate $(or $(RATE),2000) --duration $(or $(DURATION),60s)
