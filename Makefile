# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint format benchmark clean

# The install's output (hundreds of lines) goes to $(INSTALL_LOG); one line
# says where. A failed install prints the log's last lines and stops make.
INSTALL_LOG := $(VENV)/install.log

$(STAMP): setup.py pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "Installing keras-attention-zoo and its dependencies into $(VENV) (log: $(INSTALL_LOG))"
	@{ $(BIN)/pip install --quiet --upgrade pip \
	  && $(BIN)/pip install --quiet -e ".[dev]"; } > $(INSTALL_LOG) 2>&1 \
	  || { tail -n 30 $(INSTALL_LOG) >&2; echo "make: the install failed; the whole log is $(INSTALL_LOG)" >&2; exit 1; }
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# One pytest run per backend, each on TEST_WORKERS processes (pytest-xdist;
# `--dist loadscope` keeps a module on one process, so its module-scoped
# fixtures run once): TensorFlow for the tests and every docstring example,
# then the library's tests and examples again under JAX and under PyTorch
# (the CPU build, from the dev extra) to prove the layer math is
# backend-agnostic (conftest.py skips what needs TensorFlow), and the zoo's
# verbs, a short fit, save_to_preset, the plots, the `python -m zoo` verbs
# and the TensorFlow-only refusals on each family (tests/zoo/backends/test_backends*.py,
# compared with a TensorFlow run that the JAX pass makes and the PyTorch pass
# reads from pytest's cache: tests/zoo/backends/tensorflow_reference.py), the strategies (JAX's
# keras.distribution.DataParallel over two CPU devices), fits resumed from
# their run directory (SIGKILLed or interrupted), and the one search front
# end, compiled once per shape, and its examples (tests/zoo/base/test_generation.py,
# zoo/base/generation.py). The PyTorch
# pass runs one OpenMP thread per process: with a thread per core in each of
# the processes sharing the cores, tests/zoo/backends/test_backends*.py took 353 s
# instead of 121 s (2 shared cores).
TEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope
BACKEND_TESTS := tests/keras_attention keras_attention \
	tests/zoo/backends/test_backends*.py \
	tests/zoo/training/test_distribution_backends.py \
	tests/zoo/training/test_resume_backends.py \
	tests/zoo/training/test_training_resume.py \
	tests/zoo/base/test_generation.py zoo/base/generation.py \
	zoo/base/search_options.py

test: lint
	$(PYTEST) --doctest-modules tests keras_attention zoo
	KERAS_BACKEND=jax $(PYTEST) -m "not tensorflow_only" \
		--doctest-modules $(BACKEND_TESTS)
	KERAS_BACKEND=torch OMP_NUM_THREADS=1 $(PYTEST) -m "not tensorflow_only" \
		--doctest-modules $(BACKEND_TESTS)

benchmark: $(STAMP)
	$(BIN)/python benchmarks/attention.py

clean:
	rm -rf $(VENV) demo_output build *.egg-info
