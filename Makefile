# Two commands on a fresh machine: `make demo` and `make test`; `make docs` builds the user guide.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.installed-docs

.PHONY: demo test docs venv clean

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

$(DOCS_STAMP): pyproject.toml $(STAMP)
	$(PY) -m pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

# The user guide (docs/ + mkdocs.yml) into site/; any warning fails the build.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) build site src/*.egg-info .pytest_cache
