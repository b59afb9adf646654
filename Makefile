# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test fuzz venv clean

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

# The property tests with many more examples (minutes, not seconds); `make test` runs them bounded.
fuzz: $(STAMP)
	TOOLNEXUS_FUZZ_PROFILE=fuzz $(PY) -m pytest -p no:cacheprovider -o timeout=3600 tests/test_fuzz_*.py

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
