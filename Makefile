# Two commands on a fresh machine: `make demo` and `make test`; `make docs` builds the user guide.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.installed-docs

.PHONY: demo test docs fuzz venv clean bench conformance conformance-mcp conformance-record test-fleet test-browser

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m toolnexus._demo

# The linter (ruff), the layer contracts (import-linter) and the type checker run first; then the suite.
test: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples conformance
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m mypy
	$(PY) -m pytest

# The worker fleet with real processes on SQLite and PostgreSQL (SIGKILL, SIGTERM, 3 workers draining
# 300 queued runs, the run lifecycle through the CLI, workers stopped mid-retry of a webhook): minutes,
# not seconds, so not in `make test`.
test-fleet: $(STAMP)
	TOOLNEXUS_FLEET=1 $(PY) -m pytest tests/test_fleet_processes.py \
		"tests/test_inbox_notify.py::test_a_worker_stopped_mid_retry_leaves_the_webhook_to_the_next_workers_once"

# The web inbox in a real browser: Debian's chromium (apt-get install chromium; never a downloaded
# browser) driven by Playwright (the `browser` extra). Also rewrites the screenshots in docs/img/.
BROWSER_STAMP := $(VENV)/.installed-browser
$(BROWSER_STAMP): pyproject.toml $(STAMP)
	$(PY) -m pip install --quiet -e '.[browser]'
	touch $(BROWSER_STAMP)

test-browser: $(BROWSER_STAMP)
	TOOLNEXUS_BROWSER=1 $(PY) -m pytest tests/browser

# Speed and memory, side by side with a no-framework floor (and toolnexus 0.21.0 when its venv exists);
# PEERS=1 adds openai-agents, pydantic-ai and langgraph through the reference harness. See benchmarks/README.md.
bench: $(STAMP)
	PEERS=$(PEERS) $(PY) benchmarks/bench.py

# The property tests with many more examples (minutes, not seconds); `make test` runs them bounded.
fuzz: $(STAMP)
	TOOLNEXUS_FUZZ_PROFILE=fuzz $(PY) -m pytest -p no:cacheprovider -o timeout=3600 tests/test_fuzz_*.py

$(DOCS_STAMP): pyproject.toml $(STAMP)
	$(PY) -m pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

# The user guide (docs/ + mkdocs.yml) into site/; any warning fails the build.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

# The official protocol suites (MCP conformance from npm with its own Node 22; the A2A TCK from a
# fetched copy at a pinned commit), each against what we serve and what we call; results go to
# conformance/results/. See docs/conformance.md.
CONF_NODE := conformance/node_modules/.installed
$(CONF_NODE): conformance/package.json conformance/package-lock.json
	cd conformance && npm ci --no-audit --no-fund --loglevel=error
	touch $(CONF_NODE)

conformance: conformance-mcp
	$(PY) conformance/a2a_tck.py

conformance-mcp: $(STAMP) $(CONF_NODE)
	$(PY) conformance/mcp_server.py
	$(PY) conformance/mcp_client.py $(if $(MCP_REFERENCE_CLIENT),--reference $(MCP_REFERENCE_CLIENT))

# A full run (the Python SDK's conformance client beside ours) whose summaries are then copied to
# docs/conformance-runs/, which is committed: docs/conformance.md links it and quotes its figures.
# CI never runs this, so it never dirties the tree; update the date and figures in the docs after.
RECORDED := mcp_server.md mcp_server.json mcp_client.md mcp_client.json a2a_tck.md
conformance-record:
	@test -n "$(MCP_REFERENCE_CLIENT)" || { echo "conformance-record: set MCP_REFERENCE_CLIENT to the Python SDK's .github/actions/conformance/client.py (from a fetched copy)" >&2; exit 2; }
	$(MAKE) conformance MCP_REFERENCE_CLIENT=$(MCP_REFERENCE_CLIENT)
	mkdir -p docs/conformance-runs
	cp $(addprefix conformance/results/,$(RECORDED)) docs/conformance-runs/
	@echo "recorded in docs/conformance-runs/: now update the date and figures in docs/conformance.md"

clean:
	rm -rf $(VENV) build site src/*.egg-info .pytest_cache
