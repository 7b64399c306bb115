# casscade: `make demo` and `make test` work on a fresh machine with Java 17, Maven, Python 3.11.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STACK  := deploy/local/stack

.PHONY: venv demo test unit integration lint bench measure soak up down status fixtures clean dist

# setup.py and the .pyx: an editable install builds the compiled reader once, so a change to
# either must reinstall (rebuild) it
$(VENV)/.installed: pyproject.toml deploy/local/pyproject.toml setup.py shared/rowupdate_creader.pyx
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@# setuptools warns on every editable install of a flat layout, whatever the mode (a boxed
	@# BuildBackendWarning: seen for the default and compat modes; strict's is in its source)
	PYTHONWARNINGS=ignore $(PY) -m pip install -q -e '.[dev]' -e deploy/local
	touch $@

venv: $(VENV)/.installed  ## create .venv with casscade and its dev tools

NODES ?= 1
demo: venv  ## start the local stack, run the demo workload, show what comes out (NODES=3: a ring at RF=3; SECURE=1: the locked stack)
	$(PY) deploy/local/demo.py --nodes $(NODES) $(if $(SECURE),--secure)

UNIT        := tests/unit tests/devstack/unit
INTEGRATION := tests/integration tests/devstack/integration

# two pytest sessions side by side on services of their own (tests/support/suite_sections.py):
# `stack` (the one-node stack's integration tests) and `ring` (the unit tests, then the rings,
# the Spark cluster, HDFS; a Kafka of its own)
test: venv  ## the whole suite: unit tests, then integration tests on the real stack, in two sections side by side
	$(PY) tests/support/suite_sections.py

measure: venv  ## tests that take a figure the docs quote (e.g. cdc_on_repair_enabled false on a joining node); not part of `make test`
	$(PY) -m pytest -s -m measurement $(INTEGRATION)

unit: venv  ## unit tests only (no services), the dev stack's too
	$(PY) -m pytest $(UNIT)

integration: venv  ## integration tests only (starts or reuses the local stack), the dev stack's too
	$(PY) -m pytest -m "not measurement" $(INTEGRATION)

dist: venv  ## the wheel (with the compiled reader) and the sdist, into dist/
	rm -rf dist
	$(PY) -m build --outdir dist .

lint: venv  ## ruff, and the import layers of pyproject.toml (import-linter)
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports

bench: venv  ## benchmarks (rows/s, MB); not part of `make test`
	$(PY) -m pytest tests/benchmarks -s -o python_files='bench_*.py' -o python_functions='test_bench_*'

soak: venv  ## the pipeline at RF=3 under random faults, ended by casscade verify (SOAK_ARGS="--statements 5000 --fault-every 20"); not part of `make test`
	PYTHONPATH=.:deploy/local:tests $(PY) -m soak $(SOAK_ARGS)

up: venv
	$(STACK) up
down:
	$(STACK) down
status:
	$(STACK) status

fixtures: venv  ## regenerate tests/fixtures/commitlog from a real Cassandra (slow)
	$(PY) tests/fixtures/commitlog/generate.py

clean: down
	rm -rf .casscade

.PHONY: images
images: venv  ## the publisher and materializer images (deploy/images/build.sh: mmdebstrap, buildah; IMAGES_ARGS="--force")
	PYTHON=$(PY) deploy/images/build.sh $(IMAGES_ARGS)
