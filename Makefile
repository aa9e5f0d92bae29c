# Two commands from a fresh clone, each installing what it needs the first time into a local virtual environment
# (.venv) at the measured versions (constraints.txt):
#   make main   the main job: evaluate the tiny speller, train GRPO on 2 CPU cores, evaluate again (benchmarks/tiny_main_job.py)
#   make test   the tests: two pytest workers (each pinned to its own core, tests/conftest.py), then the tests that
#               need both cores (two processes or threads at once), alone
# TORCH_INDEX picks torch's wheel index, e.g. TORCH_INDEX="--index-url https://download.pytorch.org/whl/cpu" for the
# CPU-only wheel (README); empty, pip's own index serves torch==2.13.0.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_INDEX ?=
export HF_HUB_OFFLINE ?= 1
export WANDB_MODE ?= disabled
export TOKENIZERS_PARALLELISM ?= false

.PHONY: main test

$(BIN)/.installed: pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q torch==2.13.0 $(TORCH_INDEX)
	$(BIN)/python -m pip install -q -e ".[dev,deepspeed]" -c constraints.txt
	touch $@

main: $(BIN)/.installed
	$(BIN)/python benchmarks/tiny_main_job.py

test: $(BIN)/.installed
	$(BIN)/python -m pytest -q -n 2 -m "not slow and not serial"
	$(BIN)/python -m pytest -q -m "serial and not slow"
