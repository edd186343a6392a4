# KiviDB agent memory. `make run` serves the API locally; `make test` is the whole suite.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SAM_VENV := .venv-sam
SAM := $(SAM_VENV)/bin/sam
STAMP := $(VENV)/.installed

.PHONY: run test test-runs unit integration e2e lint format validate openapi build deploy replay fuzz \
	console console-screenshots typescript typescript-schema bench bench-working-memory bench-request-path bench-cold-start bench-retrieval bench-latency bench-background bench-updates bench-faults \
	test-stress bench-load bench-imports bench-limits bench-webhooks bench-reads bench-prefix-cache bench-throughput bench-ab bench-consolidation clean

# tools.install: the virtualenv with progress (a bar per step on a terminal, one line per step
# piped) and pip's output in .local/install.log, which its first line names.
$(STAMP): requirements-dev.txt layers/core/requirements.txt client/pyproject.toml tools/install.py
	@$(PYTHON) -m tools.install --venv $(VENV) --upgrade-pip -r requirements-dev.txt --layer
	@touch $(STAMP)

# The web console (docs/console.md): console/src/ built by esbuild into functions/console/static/
# (not committed), again whenever a source, the build script or the lock file is newer.
CONSOLE_DEPS := console/node_modules/.installed
CONSOLE_SRC := $(shell find console/src -type f 2>/dev/null) console/build.mjs console/package.json
CONSOLE_OUT := functions/console/static/index.html

$(CONSOLE_DEPS): console/package.json console/package-lock.json
	@echo "make: console: installing its npm packages (npm ci, a few seconds; its output: .local/install.log)"
	@mkdir -p .local && cd console && npm ci --no-audit --no-fund --loglevel=error >> ../.local/install.log
	@touch $(CONSOLE_DEPS)

$(CONSOLE_OUT): $(CONSOLE_DEPS) $(CONSOLE_SRC)
	@cd console && npm run --silent build

# The TypeScript client (docs/client.md, "TypeScript"): clients/typescript/ built by tsc into
# dist/ (not committed); its API types, src/schema.ts, are generated from docs/openapi.json by
# openapi-typescript (`make typescript-schema`), and `make lint` fails when they drift.
TS_DIR := clients/typescript
TS_DEPS := $(TS_DIR)/node_modules/.installed
TS_OUT := $(TS_DIR)/dist/index.js

$(TS_DEPS): $(TS_DIR)/package.json $(TS_DIR)/package-lock.json
	cd $(TS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $(TS_DEPS)

$(TS_OUT): $(TS_DEPS) $(shell find $(TS_DIR)/src -type f 2>/dev/null) $(TS_DIR)/tsconfig.json $(TS_DIR)/tsconfig.cjs.json
	cd $(TS_DIR) && npm run --silent build

# The TypeScript examples (examples/typescript/): a project of their own that installs the built
# client as a copy (install-links), as a user's project would, with the frameworks beside it.
TS_EXAMPLES := examples/typescript
TS_EXAMPLES_DEPS := $(TS_EXAMPLES)/node_modules/.installed
TS_EXAMPLES_OUT := $(TS_EXAMPLES)/dist/quickstart.js

$(TS_EXAMPLES_DEPS): $(TS_EXAMPLES)/package.json $(TS_EXAMPLES)/package-lock.json $(TS_OUT)
	cd $(TS_EXAMPLES) && npm ci --no-audit --no-fund --loglevel=error
	touch $(TS_EXAMPLES_DEPS)

$(TS_EXAMPLES_OUT): $(TS_EXAMPLES_DEPS) $(shell find $(TS_EXAMPLES)/src -type f 2>/dev/null) $(TS_EXAMPLES)/tsconfig.json
	cd $(TS_EXAMPLES) && npx tsc -p tsconfig.json

# The frameworks' own tests, from their source distributions on PyPI (tools/framework_tests.py):
# fetched once per pinned version, like any other dependency, and run against the adapters.
FRAMEWORK_TESTS := .cache/framework-tests/.fetched-$(shell sed -n 's/^    "\(.*\)": "\(.*\)",$$/\1-\2/p' tools/framework_tests.py | tr '\n' '_')

$(FRAMEWORK_TESTS): $(STAMP) tools/framework_tests.py
	$(PY) -m tools.framework_tests fetch
	touch $(FRAMEWORK_TESTS)

# Strands pins mcp<2.2 and the MCP server mcp 2.3.0: its adapter's tests get their own virtualenv.
STRANDS_VENV := .venv-strands
STRANDS_STAMP := $(STRANDS_VENV)/.installed

$(STRANDS_STAMP): requirements-strands.txt client/pyproject.toml
	$(PYTHON) -m venv $(STRANDS_VENV)
	$(STRANDS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(STRANDS_VENV)/bin/python -m pip install --quiet -r requirements-strands.txt
	touch $(STRANDS_STAMP)

# CrewAI pins mcp<2 and pydantic<2.13: its adapter's tests get their own virtualenv too.
CREWAI_VENV := .venv-crewai
CREWAI_STAMP := $(CREWAI_VENV)/.installed

$(CREWAI_STAMP): requirements-crewai.txt client/pyproject.toml
	$(PYTHON) -m venv $(CREWAI_VENV)
	$(CREWAI_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CREWAI_VENV)/bin/python -m pip install --quiet -r requirements-crewai.txt
	touch $(CREWAI_STAMP)

## typescript: build the TypeScript client (npm ci when needed, then tsc)
typescript: $(TS_OUT)

## typescript-schema: regenerate the TypeScript client's API types from docs/openapi.json
typescript-schema: $(TS_DEPS)
	cd $(TS_DIR) && npx openapi-typescript ../../docs/openapi.json --output src/schema.ts

## console: build the web console (npm ci when needed, then esbuild)
console: $(CONSOLE_OUT)

## console-screenshots: the console's browser tests, saving a screenshot of each page in docs/console/
console-screenshots: $(STAMP) $(CONSOLE_OUT)
	KIVIDB_CONSOLE_SCREENSHOTS=docs/console $(PY) -m pytest -q tests/e2e/test_console.py tests/e2e/test_console_actors.py

## run: serve the API and the console on http://127.0.0.1:$${PORT:-3000} (routes from template.yaml)
run: $(STAMP) $(CONSOLE_OUT)
	@$(PY) -m local

# The tests `make test` runs a second time on Redis Clusters the suite starts
# (KIVIDB_TEST_CLUSTER=1; docs/testing.md says why these): every route through the handlers,
# sessions, background work, memories and supersede, the schedulers, instances, transfer,
# idempotent writes, usage, and the HTTP suites of the README session, memories, background
# work, supersede, usage and webhooks.
CLUSTER_TESTS := tests/integration/test_sessions.py tests/integration/test_stores.py \
	tests/integration/test_handlers.py tests/integration/test_background.py \
	tests/integration/test_memories.py tests/integration/test_supersede.py \
	tests/integration/test_scheduler.py tests/integration/test_instances.py \
	tests/integration/test_transfer.py tests/integration/test_ownership_guard.py \
	tests/integration/test_idempotency_records.py tests/e2e/test_idempotency_http.py \
	tests/integration/test_session_pop.py tests/integration/test_keyed_memories.py \
	tests/integration/test_usage.py tests/e2e/test_usage_http.py tests/e2e/test_webhooks_http.py \
	tests/integration/test_profiles.py tests/e2e/test_profiles_http.py \
	tests/integration/test_consolidation.py tests/integration/test_settings_freshness.py \
	tests/e2e/test_http.py tests/e2e/test_memories_http.py \
	tests/e2e/test_background_http.py tests/e2e/test_supersede_http.py \
	--deselect tests/e2e/test_background_http.py::test_a_replayed_conversation_is_summarized_and_extracted_on_its_own
# What cannot run on a cluster (docs/testing.md): numbered databases of one server, a server's
# own maxmemory, the browser tests (once is enough).
CLUSTER_EXCLUDED := --ignore tests/integration/test_control.py \
	--ignore tests/integration/test_oom_reads.py --ignore tests/e2e/test_console.py \
	--ignore tests/e2e/test_console_actors.py

## test: lint, type-check, validate the template, then every test (starts its own Redis), then
## the cluster subset on Redis Clusters it starts (CLUSTER_TESTS): test-runs
test: lint validate $(CONSOLE_OUT) $(FRAMEWORK_TESTS) $(STRANDS_STAMP) $(CREWAI_STAMP) $(TS_OUT) $(TS_EXAMPLES_OUT)
	@$(MAKE) --no-print-directory test-runs

# pytest-xdist workers for each run, a test file to a worker (its module fixtures stay whole):
# each worker starts a Redis server (or its clusters) and a local stack of its own
# (docs/testing.md). TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2
PYTEST_WORKERS := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

## test-runs: the two pytest runs of `make test` without its checks and builds: every test, then
## the cluster subset, which runs even when the first run failed; fails when either did
test-runs:
	@main=0; cluster=0; \
	$(PY) -m pytest -q $(PYTEST_WORKERS) || main=$$?; \
	KIVIDB_TEST_CLUSTER=1 $(PY) -m pytest -q $(PYTEST_WORKERS) $(CLUSTER_TESTS) || cluster=$$?; \
	echo "make test: every test exited $$main, the cluster subset $$cluster"; \
	test $$main -eq 0 && test $$cluster -eq 0

## test-stress: the e2e suite twice side by side (each as make test runs it), ROUNDS rounds in a
## row (3); stops at the first round where either run failed; logs in .local/stress/
ROUNDS ?= 3
test-stress: $(STAMP) $(CONSOLE_OUT) $(FRAMEWORK_TESTS) $(STRANDS_STAMP) $(CREWAI_STAMP) $(TS_OUT) $(TS_EXAMPLES_OUT)
	@mkdir -p .local/stress; \
	for round in $$(seq $(ROUNDS)); do \
		start=$$(date +%s); \
		$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) tests/e2e > .local/stress/$$round-a.log 2>&1 & a=$$!; \
		$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) tests/e2e > .local/stress/$$round-b.log 2>&1 & b=$$!; \
		ra=0; rb=0; wait $$a || ra=$$?; wait $$b || rb=$$?; \
		echo "make test-stress: round $$round of $(ROUNDS): exit $$ra and $$rb in $$(( $$(date +%s) - start )) s, load average $$(cut -d' ' -f1 /proc/loadavg) at the end"; \
		for run in a b; do echo "  $$run: $$(tail -n 1 .local/stress/$$round-$$run.log)"; done; \
		test $$ra -eq 0 && test $$rb -eq 0 || exit 1; \
	done

## test-cluster: every test that can run on a cluster, on Redis Clusters it starts
test-cluster: $(STAMP) $(CONSOLE_OUT) $(FRAMEWORK_TESTS) $(STRANDS_STAMP) $(CREWAI_STAMP) $(TS_OUT) $(TS_EXAMPLES_OUT)
	KIVIDB_TEST_CLUSTER=1 $(PY) -m pytest -q $(CLUSTER_EXCLUDED)

unit: $(STAMP)
	$(PY) -m pytest -q tests/unit

integration: $(STAMP)
	$(PY) -m pytest -q tests/integration

e2e: $(STAMP) $(CONSOLE_OUT) $(TS_OUT) $(TS_EXAMPLES_OUT)
	$(PY) -m pytest -q tests/e2e

## lint: ruff (style, imports, complexity at most 12, at most 7 parameters in the layer), mypy
## (strict, pydantic plugin), the layer's import rules (import-linter, pyproject.toml) and no
## import circle in it (tools/import_cycles.py), the generated sync client, and the
## TypeScript client's generated API types and strict type check (the examples' too)
lint: $(STAMP) $(TS_DEPS) $(TS_EXAMPLES_DEPS)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy layers/core client/src local tools functions bench examples
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m tools.import_cycles
	$(PY) -m tools.unasync_client --check
	cd $(TS_DIR) && npx openapi-typescript ../../docs/openapi.json --output .schema-check.ts --silent \
		&& if cmp -s .schema-check.ts src/schema.ts; then rm .schema-check.ts; else rm .schema-check.ts; \
		echo "clients/typescript/src/schema.ts is not what docs/openapi.json generates: make typescript-schema"; \
		exit 1; fi
	cd $(TS_DIR) && npx tsc -p tsconfig.json --noEmit && npx tsc -p tsconfig.cjs.json --noEmit
	cd $(TS_EXAMPLES) && npx tsc -p tsconfig.json --noEmit

format: $(STAMP)
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

## validate: cfn-lint on template.yaml (and, when the SAM venv exists, `sam validate --lint` and
## tools.sam_aliases: every function has SnapStart and is invoked through its alias, as SAM
## transforms the template), and docs/openapi.json matches the routes the functions declare
validate: $(STAMP)
	$(VENV)/bin/cfn-lint template.yaml
	$(PY) -m tools.openapi --check
	@if [ -x $(SAM) ]; then $(SAM) validate --lint --region us-east-1 \
		&& $(SAM_VENV)/bin/python -m tools.sam_aliases; fi

## openapi: regenerate docs/openapi.json from the functions' routes
openapi: $(STAMP) $(TS_DEPS)
	$(PY) -m tools.openapi
	cd $(TS_DIR) && npx openapi-typescript ../../docs/openapi.json --output src/schema.ts --silent

$(SAM):
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet aws-sam-cli==1.170.0

## build: the console, then sam build (in its own venv: aws-sam-cli pins an older boto3)
build: $(SAM) $(CONSOLE_OUT)
	$(SAM) build $(ARGS)

## deploy: the console, sam build, then sam deploy (first time: make deploy ARGS=--guided)
deploy: $(SAM) $(CONSOLE_OUT)
	$(SAM) build
	$(SAM) deploy $(ARGS)

## fuzz: schemathesis over docs/openapi.json against a local stack, 100 examples per operation
## and phase (at least 2,000 cases; `make test` runs 20); figures in bench/results/fuzz.json
fuzz: $(STAMP)
	KIVIDB_FUZZ_EXAMPLES=100 KIVIDB_FUZZ_MIN_CASES=2000 KIVIDB_FUZZ_RESULTS=bench/results/fuzz.json \
		$(PY) -m pytest -q tests/e2e/test_fuzz.py

## replay: push a LoCoMo conversation through the running local stack (see README)
replay: $(STAMP)
	$(PY) -m tools.replay $(ARGS)

BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP) bench/requirements.txt
	@$(PY) -m tools.install --venv $(VENV) -r bench/requirements.txt
	@touch $(BENCH_STAMP)

## bench: every benchmark; each writes a table and a plot under bench/results/
bench: bench-working-memory bench-latency bench-cold-start bench-request-path bench-retrieval bench-background bench-updates bench-faults bench-load bench-imports bench-limits bench-webhooks bench-reads bench-prefix-cache bench-throughput bench-consolidation

## bench-working-memory: add events and recall through the local stack, vs in-process baselines
bench-working-memory: $(BENCH_STAMP)
	$(PY) -m bench.working_memory $(ARGS)

## bench-request-path: the warm request path: per route the share of each part, round trips,
## profiles; HTTP p50 / core p50 at 10,000 x 384 with PASS/FAIL (bench/results/request_path.md)
bench-request-path: $(BENCH_STAMP)
	$(PY) -m bench.request_path --profile recall --profile "keyword search" --profile "semantic search" --profile "add events" --profile "get session" $(ARGS)

## bench-cold-start: first recall in a fresh process at 10,000 / 100,000 x 1,536, with and
## without the actor's kept index, alone and in a burst of 8, vs warm recall (cold_start.md)
bench-cold-start: $(BENCH_STAMP)
	$(PY) -m bench.cold_start $(ARGS)

## bench-latency: search, recall and add at 1,000 / 10,000 / 100,000 memories, vs a NumPy scan
bench-latency: $(BENCH_STAMP)
	$(PY) -m bench.latency $(ARGS)

## bench-updates: scripted fact pairs through extraction: newer facts win, stale ones go
## (supersede vs plain add, side by side)
bench-updates: $(BENCH_STAMP)
	$(PY) -m bench.updates $(ARGS)

## bench-background: one background run over a 1,000-message session: peak memory, model calls
bench-background: $(BENCH_STAMP)
	$(PY) -m bench.background $(ARGS)

## bench-faults: database killed / stalled / connections cut and provider faults under traffic:
## answers by status, latency, recovery, and every acknowledged write read back exactly once
bench-faults: $(BENCH_STAMP)
	$(PY) -m bench.faults $(ARGS)

## bench-load: locust, headless, loopback only: calls/s, p50 / p99 per route, errors, peak
## memory, and the exactly-once check afterwards
bench-load: $(BENCH_STAMP)
	$(PY) -m bench.load $(ARGS)

## bench-imports: a new container per function: layer modules loaded and time to import and answer
## its sample event, against the layout before the packages (--baseline), interleaved
bench-imports: $(BENCH_STAMP)
	$(PY) -m bench.imports $(ARGS)

## bench-limits: a rate limit under 4 callers (accepted rate vs the limit), a neighbour's latency
## beside a flood, and the authorizer's extra step in-process
bench-limits: $(BENCH_STAMP)
	$(PY) -m bench.limits $(ARGS)

## bench-webhooks: writes to a store with webhooks vs without (a slow and a failing receiver),
## every event delivered and verified, the usage count's cost in the authorizer's step, and a
## healthy organization's deliveries beside another's five hanging endpoints (p95 within 2x)
bench-webhooks: $(BENCH_STAMP)
	$(PY) -m bench.webhooks $(ARGS)

## bench-reads: what 1,000 stores hold (GET /usage's read of an instance of 300,000 keys) and a
## keyed search's peak memory over 1,000 / 4,000 values of 60 KB, each against the read before
## (bench/results/reads.md)
bench-reads: $(BENCH_STAMP)
	$(PY) -m bench.reads $(ARGS)

## bench-prefix-cache: LoCoMo turn by turn: the share of each recall context that is a prefix
## of the previous turn's, and the tokens OpenAI's and Anthropic's caches serve, vs the older
## layout (bench/results/prefix_cache.md)
bench-prefix-cache: $(BENCH_STAMP)
	$(PY) -m bench.prefix_cache $(ARGS)

## bench-throughput: 1, 4, 16 and 64 clients against the local stack with 2 workers (search,
## recall, add events, add memory at 10,000 x 384): req/s, p50 / p99, saturation points; with
## ARGS="--peer-python ... --peer-redis-stack ..." agent-memory-server under the same load
## (bench/results/throughput.md)
bench-throughput: $(BENCH_STAMP)
	$(PY) -m bench.throughput $(ARGS)

## bench-ab: interleaved A/B of bench-request-path and bench-latency between checkout OLD and
## this one, new / old per route with PASS or FAIL (10% bound) and cProfile call counts per
## request; e.g. `git worktree add ../base 7cd5664 && make bench-ab OLD=../base`
## (bench/results/request_path-ab.md, latency-ab.md)
bench-ab: $(BENCH_STAMP)
	$(PY) -m bench.ab --old $(OLD) $(ARGS)

## bench-scale: 1,000,000 memories of 384 dimensions on a three-primary cluster: memory per
## memory and per shard, reads warm and cold, counts, 10,000 sessions appending, DELETE
bench-scale: $(BENCH_STAMP)
	$(PY) -m bench.scale $(ARGS)

RETRIEVAL_STAMP := $(VENV)/.retrieval-installed
$(RETRIEVAL_STAMP): $(BENCH_STAMP) bench/requirements-retrieval.txt
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -r bench/requirements-retrieval.txt
	touch $(RETRIEVAL_STAMP)

## bench-retrieval: hit@k and coverage@k on LoCoMo, semantic / keyword / hybrid (MiniLM, local)
bench-retrieval: $(RETRIEVAL_STAMP)
	$(PY) -m bench.retrieval $(ARGS)

## bench-consolidation: consolidation runs on LoCoMo facts with known duplicates: memories and
## duplicates before and after, hybrid hit@10/coverage@10, chains, calls and tokens at 1,000
## memories (ARGS="--large --embedder minilm" for 10,000 and MiniLM, as in the results file)
bench-consolidation: $(BENCH_STAMP)
	$(PY) -m bench.consolidation $(ARGS)

clean:
	rm -rf $(VENV) $(SAM_VENV) $(STRANDS_VENV) $(CREWAI_VENV) .cache/framework-tests .aws-sam .mypy_cache .ruff_cache .pytest_cache
	rm -rf console/node_modules functions/console/static clients/typescript/node_modules clients/typescript/dist examples/typescript/node_modules examples/typescript/dist
