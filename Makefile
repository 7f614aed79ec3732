# Two entry points for a fresh machine: `make demo` and `make test` (each sets up .venv first).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test docs bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch pinned to the CPU build on this disk; any other version downloads a CUDA build.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[kernels,dev]'
	touch $@

# Lint the bundled fixtures with the reference kernels they call (cross-file findings need
# both): the fixtures are full of the bugs sync-lint exists to find (exit 1 = findings).
demo: $(VENV)/.installed
	$(BIN)/sync-lint check fixtures/ reference_kernels/ --no-cache; test $$? -le 1
	$(BIN)/sync-lint check fixtures/ reference_kernels/ --no-cache --statistics; test $$? -le 1

test: $(VENV)/.installed
	$(BIN)/python -m pytest -q

docs: $(VENV)/.installed
	$(BIN)/python -m sync_lint.docs docs/rules

clean:
	rm -rf $(VENV) .sync_lint_cache .pytest_cache
