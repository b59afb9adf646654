# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test fuzz venv clean bench

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m toolnexus.demo

test: $(STAMP)
	$(PY) -m pytest

# Speed and memory, side by side with a no-framework floor (and toolnexus 0.21.0 when its venv exists);
# PEERS=1 adds openai-agents, pydantic-ai and langgraph through the reference harness. See benchmarks/README.md.
bench: $(STAMP)
	PEERS=$(PEERS) $(PY) benchmarks/bench.py

# The property tests with many more examples (minutes, not seconds); `make test` runs them bounded.
fuzz: $(STAMP)
	TOOLNEXUS_FUZZ_PROFILE=fuzz $(PY) -m pytest -p no:cacheprovider -o timeout=3600 tests/test_fuzz_*.py

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
