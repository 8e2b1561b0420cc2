# `make test` and `make demo` each work on a fresh clone: they create .venv and install what they need.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-core

WHEELS := .cache/wheels/.downloaded

.PHONY: install test test-all lint demo schemas verify check-results clean wheels

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip uninstall -q -y cltoolkit 2>/dev/null || true  # this project's distribution before it was clt-prereg
	$(BIN)/pip install -q -e '.[dev,ray,nav,wm]'
	touch $(STAMP)

install: $(STAMP)

# Continual World's package stack as wheels on this machine: the two-node CW10 test builds its environment from
# them with pip's index off (tests talk to loopback only); hash-checked against tests/data/cw10-wheels.txt
$(WHEELS): tests/data/cw10-wheels.txt $(BIN)/python
	$(BIN)/pip download -q --no-deps --only-binary=:all: --require-hashes -r tests/data/cw10-wheels.txt -d .cache/wheels
	touch $@

wheels: $(WHEELS)

test: lint wheels
	$(BIN)/clt protocol verify $$(test "$$(git rev-parse --is-shallow-repository 2>/dev/null)" = true && echo --accept-shallow)
	$(MAKE) check-results
	$(BIN)/python -m pytest -q
	$(BIN)/python -m pytest -q -m e2e
	$(BIN)/python -m pytest -q -m committed
	$(BIN)/python -m pytest -q -m walkthrough
	$(BIN)/python -m pytest -q -m dist
	$(BIN)/python -m pytest -q -m browser

test-all: $(STAMP)
	$(BIN)/python -m pytest -q -m ''

lint: $(STAMP)
	$(BIN)/ruff check cltoolkit tests bench scripts
	$(BIN)/ruff format --check cltoolkit tests bench scripts
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo

schemas: $(STAMP)
	$(BIN)/python -m cltoolkit.schemas_write

verify: $(STAMP)
	$(BIN)/clt protocol verify $$(test "$$(git rev-parse --is-shallow-repository 2>/dev/null)" = true && echo --accept-shallow)

# every reported protocol's committed results must reproduce from the sealed records in place
check-results: $(STAMP)
	@for f in protocols/*.json; do \
	  id=$$(basename $$f .json); \
	  if [ -d reports/$$id ] || grep -q '"protocolSha256"' $$f; then $(BIN)/clt report --protocol $$id --check || exit 1; fi; \
	done

demo: $(STAMP)
	bash scripts/demo.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
