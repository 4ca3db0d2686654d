# attnlab — the two set-up commands are `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
export ATTNLAB_DATA ?= $(abspath ../shared/data)

.PHONY: demo test test-slow bench lint install install-test clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# The CPU build of torch lies on local disk; install it first so nothing pulls CUDA.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) install -q -e '.[test]' torch==2.13.0
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

demo: install
	$(PY) -m attnlab.labs.demo --out runs/demo

test: install-test
	$(PY) -m pytest -q

test-slow: install-test
	$(PY) -m pytest -q -m slow

bench: install-test
	$(PY) benchmarks/attention.py

lint: install-test
	$(PY) -m ruff check src tests benchmarks

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache runs
