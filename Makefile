# Two commands from a fresh clone, each installing what it needs the first time into a local virtual environment
# (.venv) at the measured versions (constraints.txt):
#   make main   the main job: evaluate the tiny speller, train GRPO on 2 CPU cores, evaluate again (benchmarks/tiny_main_job.py)
#   make test   the tests: two pytest workers (each pinned to its own core, tests/conftest.py), then the tests that
#               need both cores (two processes or threads at once), alone
#   make lint   ruff check and ruff format --check with the project's config (pyproject.toml), as TRL's `make quality`
#   make wheel  builds the wheel and installs it into a clean virtual environment: the `rlvr` command and
#               `from rlvr.metrics.readings import with_readings` and rlvr.rewards, .data, .recipes must import from
#               there (a plain-TRL user's install)
# Neither needs the environment entered: the tools the jobs start (accelerate, torchrun, rlvr) are started through
# .venv's interpreter (rlvr/runs/tools.py). README enters it once for the commands a user types after these.
# MAIN_FLAGS go to the main job, e.g. MAIN_FLAGS=--fail_outside_range (exit 1 outside README's range: .ci/run).
# TORCH_INDEX picks torch's wheel index, e.g. TORCH_INDEX="--index-url https://download.pytorch.org/whl/cpu" for the
# CPU-only wheel (README); empty, pip's own index serves torch==2.13.0.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_INDEX ?=
export HF_HUB_OFFLINE ?= 1
export WANDB_MODE ?= disabled
export TOKENIZERS_PARALLELISM ?= false

MAIN_FLAGS ?=
WHEEL_DIR := build/wheel-check

.PHONY: main test lint wheel

# A .venv whose interpreter no longer runs (the python3 that made it was moved, upgraded or a temporary link) is
# rebuilt, not trusted for its stamp.
ifneq ($(shell $(BIN)/python -c "" 2>/dev/null && echo runs),runs)
.PHONY: $(BIN)/.installed
endif

$(BIN)/.installed: pyproject.toml constraints.txt
	$(BIN)/python -c "" 2>/dev/null || $(PYTHON) -m venv --clear $(VENV)
	$(BIN)/python -m pip install -q torch==2.13.0 $(TORCH_INDEX)
	$(BIN)/python -m pip install -q -e ".[dev,deepspeed]" -c constraints.txt
	touch $@

main: $(BIN)/.installed
	$(BIN)/python benchmarks/tiny_main_job.py $(MAIN_FLAGS)

test: $(BIN)/.installed
	$(BIN)/python -m pytest -q -n 2 -m "not slow and not serial"
	$(BIN)/python -m pytest -q -m "serial and not slow"

lint: $(BIN)/.installed
	$(BIN)/python -m ruff check .
	$(BIN)/python -m ruff format --check .

wheel: $(BIN)/.installed
	rm -rf $(WHEEL_DIR) && mkdir -p $(WHEEL_DIR)
	$(BIN)/python -m pip wheel -q --no-deps --no-build-isolation -w $(WHEEL_DIR) .
	$(PYTHON) -m venv $(WHEEL_DIR)/venv
	$(WHEEL_DIR)/venv/bin/python -m pip install -q torch==2.13.0 $(TORCH_INDEX)
	$(WHEEL_DIR)/venv/bin/python -m pip install -q $(WHEEL_DIR)/*.whl -c constraints.txt
	cd $(WHEEL_DIR) && venv/bin/rlvr plan --config $(CURDIR)/recipes/grpo_qwen3_1.7b_lora.yaml --free_gib 6.9 >/dev/null
	cd $(WHEEL_DIR) && venv/bin/python -c "from rlvr.metrics.readings import with_readings; import rlvr, rlvr.rewards, rlvr.data, \
	  rlvr.recipes.tiny.model; mods = (rlvr, rlvr.rewards, rlvr.data, rlvr.recipes); \
	  assert all('site-packages' in m.__file__ for m in mods), mods; print('wheel: rlvr from', rlvr.__file__)"
