# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint format benchmark clean

$(STAMP): setup.py pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# TensorFlow backend for everything (tests and docstring examples), then the
# library's tests and examples again under JAX to prove the layer math is
# backend-agnostic (conftest.py skips what needs TensorFlow).
test: lint
	$(BIN)/python -m pytest -q
	$(BIN)/python -m pytest -q --doctest-modules keras_attention zoo
	KERAS_BACKEND=jax $(BIN)/python -m pytest -q -m "not tensorflow_only" \
		tests/keras_attention
	KERAS_BACKEND=jax $(BIN)/python -m pytest -q -m "not tensorflow_only" \
		--doctest-modules keras_attention

benchmark: $(STAMP)
	$(BIN)/python benchmarks/attention.py

clean:
	rm -rf $(VENV) demo_output build *.egg-info
