"""One GRPO step of recipes/grpo.yaml is read in the ten files `rlvr.training.runner.STEP_FILES` lists, and building
that recipe's trainer imports no speed-up and no tiny-model code.

One subprocess (a clean `sys.modules`) builds the GPU recipe's trainer through the runner, with only what a CPU
without the Hub needs changed (the committed tiny model's weights, float32, 16-token completions, one step), records
the project modules imported by then, and traces which project files execute code during the one optimizer step
(from its first `on_step_begin` to its `on_log`)."""

from __future__ import annotations

import sys

import pytest
from conftest import CHECKOUT_ENV, printed_json, run_ok

from rlvr.training.runner import STEP_FILES

PROBE = r"""
import json, sys, threading
from pathlib import Path
from transformers import TrainerCallback
from rlvr.training.runner import prepare

repo, seen = Path.cwd().resolve(), set()
project = tuple(str(repo / part) for part in ("rlvr", "rewards", "data", "recipes"))  # not a .venv inside the clone
recipe, trainer, _ = prepare(["--config", "recipes/grpo.yaml", "--model_name_or_path", "models/tiny-speller",
    "--dtype", "float32", "--bf16", "false", "--use_cpu", "true", "--report_to", "none", "--output_dir", sys.argv[1],
    "--max_steps", "1", "--max_completion_length", "16", "--save_strategy", "no", "--print_rollouts", "false"])
modules = sorted(m for m in sys.modules if m.startswith("rlvr"))

def trace(frame, event, arg):
    if frame.f_code.co_filename.startswith(project):
        seen.add(str(Path(frame.f_code.co_filename).resolve().relative_to(repo)))

class Trace(TrainerCallback):
    def on_step_begin(self, args, state, control, **kwargs):
        threading.settrace(trace); sys.settrace(trace)
    def on_log(self, args, state, control, **kwargs):  # the last callback: the step's logging has run
        sys.settrace(None); threading.settrace(None)

trainer.add_callback(Trace())
trainer.train()
print("PROBE " + json.dumps({"modules": modules, "step_files": sorted(seen)}))
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    out = tmp_path_factory.mktemp("grpo") / "run"
    done = run_ok([sys.executable, "-c", PROBE, str(out)], env=CHECKOUT_ENV, timeout=900)
    return printed_json(done.stdout, "PROBE ")


def test_one_grpo_step_runs_in_the_listed_files_and_no_others(probe):
    assert len(STEP_FILES) <= 10 and len(set(STEP_FILES)) == len(STEP_FILES)
    assert sorted(probe["step_files"]) == sorted(STEP_FILES)


def test_building_a_gpu_recipes_trainer_imports_no_speed_up_and_no_tiny_model(probe):
    modules = probe["modules"]
    assert "rlvr.training.trainer" in modules and "rlvr.training.runner" in modules  # the build did run
    speedups = [m for m in modules if m.startswith("rlvr.speedups.")]
    assert not speedups  # the package itself (the recipe field's names, read by the parser) holds no speed-up code
    assert not [m for m in modules if m.startswith("rlvr.recipes.tiny")]
